"""The Vision Transformer (issue 12): the patch embedding as reshape-and-project and as a strided
convolution, patches in row-major order with their positions, what the model is invariant to,
all-different shapes, ViT-B/16's size from abstract shapes, clear errors for other image sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax import models
from transformer_jax.models.vit import VisionTransformer, VitConfig
from transformer_jax.nn.patches import (
    embed_patches_conv,
    embed_patches_dense,
    patchify,
    sincos_2d,
)

# All different: batch 3, height 6, width 10, patch 2 (a 3x5 grid), d 12, heads 2, classes 7.
B, H, W, P, D, K = 3, 6, 10, 2, 12, 7


def _images(channels: int, seed: int = 0) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).random((B, H, W, channels), np.float32))


def _model(channels=3, **overrides) -> VisionTransformer:
    cfg = VitConfig.tiny(
        image_height=H, image_width=W, channels=channels, patch_size=P, d_model=D, num_heads=2,
        num_classes=K, **overrides,
    )  # fmt: skip
    model = VisionTransformer(cfg, rngs=nnx.Rngs(0))
    # The head starts at zero (every class equally likely); give it weights so outputs differ.
    key = jax.random.key(1)
    model.head_kernel[...] = jax.random.normal(key, model.head_kernel[...].shape)
    return model


def _explicit_patch_projection(images, kernel, bias):
    """x_n = W p_n + b by loops: patch n at grid row n // cols, column n % cols."""
    images, kernel = np.asarray(images), np.asarray(kernel)
    rows, cols = images.shape[1] // P, images.shape[2] // P
    out = np.zeros((images.shape[0], rows * cols, kernel.shape[-1]), np.float32)
    for n in range(rows * cols):
        r, c = divmod(n, cols)
        patch = images[:, r * P : (r + 1) * P, c * P : (c + 1) * P, :]  # [B, P, P, C]
        out[:, n] = patch.reshape(len(images), -1) @ kernel.reshape(-1, kernel.shape[-1]) + bias
    return out


@pytest.mark.parametrize("channels", [1, 3])
def test_patch_embedding_as_reshape_and_as_convolution_equal_the_explicit_projection(channels):
    images = _images(channels)
    rng = np.random.default_rng(2)
    kernel = jnp.asarray(rng.normal(size=(P, P, channels, D)), jnp.float32)
    bias = jnp.asarray(rng.normal(size=(D,)), jnp.float32)
    expected = _explicit_patch_projection(images, kernel, np.asarray(bias))
    dense = embed_patches_dense(images, kernel, bias)
    conv = embed_patches_conv(images, kernel, bias)
    assert dense.shape == conv.shape == (B, (H // P) * (W // P), D)
    np.testing.assert_allclose(dense, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(conv, expected, rtol=1e-5, atol=1e-5)


def test_patchify_reads_patches_row_major():
    images = jnp.arange(B * H * W * 1, dtype=jnp.float32).reshape(B, H, W, 1)
    flat = patchify(images, P)  # [B, 15, 4]
    cols = W // P
    for n in (0, 1, cols, 2 * cols + 3):
        r, c = divmod(n, cols)
        np.testing.assert_array_equal(
            flat[1, n], images[1, r * P : (r + 1) * P, c * P : (c + 1) * P, 0].reshape(-1)
        )


def test_positions_are_added_per_patch_in_row_major_order_after_cls():
    model = _model()
    images = _images(3)
    tokens = model.embed(images)  # [B, 1 + N, D]
    projected = embed_patches_conv(images, model.patch_kernel[...], model.patch_bias[...])
    pos = model.pos_embed[...]
    assert tokens.shape == (B, 1 + (H // P) * (W // P), D)
    np.testing.assert_allclose(tokens[:, 0], jnp.broadcast_to(pos[0], (B, D)), atol=1e-6)
    np.testing.assert_allclose(tokens[:, 1:], projected + pos[1:], atol=1e-5)


def _permute_patches(images, order):
    """The image whose patch n (row-major) is patch order[n] of `images`."""
    rows, cols = H // P, W // P
    grid = images.reshape(B, rows, P, cols, P, -1).transpose(0, 1, 3, 2, 4, 5)
    grid = grid.reshape(B, rows * cols, P, P, -1)[:, order]
    grid = grid.reshape(B, rows, cols, P, P, -1).transpose(0, 1, 3, 2, 4, 5)
    return grid.reshape(images.shape)


@pytest.mark.parametrize("pool", ["cls", "gap"])
@pytest.mark.parametrize("positions", ["learned", "sincos2d", "none"])
def test_permuting_patches_changes_the_output_only_when_positions_are_on(pool, positions):
    model = _model(pool=pool, position_embedding=positions)
    if positions == "learned":  # learned positions start small; make them count
        model.pos_embed[...] = jax.random.normal(jax.random.key(3), model.pos_embed[...].shape)
    images = _images(3)
    order = np.random.default_rng(4).permutation((H // P) * (W // P))
    permuted = _permute_patches(images, order)
    assert not np.allclose(images, permuted)
    same = np.allclose(model(images), model(permuted), atol=1e-5)
    assert same == (positions == "none")


@pytest.mark.parametrize("channels", [1, 3])
def test_logits_and_attention_shapes_with_all_different_sizes(channels):
    model = _model(channels)
    logits, weights = model(_images(channels), return_attention=True)
    assert logits.shape == (B, K) and logits.dtype == jnp.float32
    tokens = 1 + (H // P) * (W // P)
    assert len(weights) == model.cfg.num_layers
    assert all(w.shape == (B, 2, tokens, tokens) for w in weights)
    np.testing.assert_allclose(weights[0].sum(-1), 1.0, rtol=1e-5)


def test_dropout_needs_a_key_and_changes_the_output():
    model = _model(dropout_rate=0.5)
    images = _images(3)
    with pytest.raises(ValueError, match="needs rng"):
        model(images, deterministic=False)
    a = model(images, rng=jax.random.key(0), deterministic=False)
    np.testing.assert_allclose(model(images), model(images))
    assert not np.allclose(a, model(images))


def test_vit_b16_size_from_abstract_shapes():
    cfg = VitConfig.vit_b16()
    assert cfg.image_shape == (224, 224, 3) and cfg.num_classes == 1000 and cfg.num_patches == 196
    # ViT-B/16 has 86,567,656 parameters; ours lack the 12 x 768 key biases (zero gradient, see
    # MultiHeadAttention).
    assert models.count_params(cfg) == 86_567_656 - 12 * 768
    assert round(models.count_params(cfg) / 1e6) == 87  # "86M": 86.56M


def test_images_of_another_size_are_a_clear_error():
    model = _model()
    with pytest.raises(ValueError, match=r"shape \(3, 8, 10, 3\).*\[batch, 6, 10, 3\].*Resize"):
        model(jnp.zeros((3, 8, 10, 3)))
    with pytest.raises(ValueError, match="channel"):
        model(jnp.zeros((3, 6, 10, 1)))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(patch_size=4), "patch size 4 does not tile a 6x10 image"),
        (dict(pool="max"), "pool"),
        (dict(position_embedding="rope"), "position_embedding"),
        (dict(d_model=10, num_heads=2, position_embedding="sincos2d"), "divisible by 4"),
        (dict(channels=0), "channels must be a positive integer"),
    ],
)
def test_bad_configs_name_the_field(overrides, message):
    fields = dict(image_height=H, image_width=W, patch_size=P, d_model=D, num_heads=2)
    with pytest.raises(ValueError, match=message):
        VitConfig.tiny(**{**fields, **overrides})


def test_sincos_2d_encodes_column_then_row():
    pe = np.asarray(sincos_2d(3, 5, 8))  # [15, 8]: quarters sin x, cos x, sin y, cos y
    assert pe.shape == (15, 8)
    x = np.arange(15) % 5
    y = np.arange(15) // 5
    np.testing.assert_allclose(pe[:, 0], np.sin(x), atol=1e-6)  # lowest frequency 1
    np.testing.assert_allclose(pe[:, 2], np.cos(x), atol=1e-6)
    np.testing.assert_allclose(pe[:, 4], np.sin(y), atol=1e-6)
    np.testing.assert_allclose(pe[:, 6], np.cos(y), atol=1e-6)
    assert len({tuple(row) for row in pe.round(6)}) == 15  # every patch distinct


def test_registry_builds_the_vit_from_a_section_and_the_data():
    section = models.config_section("vit", "tiny")
    assert section.num_classes is None and section.image_height is None  # the data decides
    cfg = models.build_config(
        section, {"num_classes": K, "image_height": H, "image_width": W, "channels": 3}
    )
    assert cfg.image_shape == (H, W, 3) and cfg.num_classes == K
