"""The ViT's convolutional stem: each layer equals a 3x3, stride-2, zero-padded convolution and
ReLU written with loops; the sizes it takes and refuses; a model with a stem keeps the token
grid of its patch size and trains."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.models.vit import VisionTransformer, VitConfig
from transformer_jax.nn.conv_stem import conv_stem, stem_layout


def _explicit_layer(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray, s: int) -> np.ndarray:
    """relu(conv) by loops: output pixel (i, j) reads input rows s i - 1 .. s i + 1, columns
    s j - 1 .. s j + 1 (zero outside the image)."""
    b, h, w, _ = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((b, h // s, w // s, kernel.shape[-1]), np.float32)
    for i in range(h // s):
        for j in range(w // s):
            window = padded[:, s * i : s * i + 3, s * j : s * j + 3, :]  # [B, 3, 3, C]
            out[:, i, j] = np.einsum("bhwc,hwco->bo", window, kernel) + bias
    return np.maximum(out, 0)


def test_each_layer_is_a_padded_convolution_and_relu():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 12, 20, 5)).astype(np.float32)  # all sizes different
    shapes, strides = [(5, 4), (4, 7), (7, 11)], [1, 2, 2]
    kernels = [rng.standard_normal((3, 3, i, o)).astype(np.float32) for i, o in shapes]
    biases = [rng.standard_normal(o).astype(np.float32) for _, o in shapes]
    got = np.asarray(conv_stem(jnp.asarray(x), list(map(jnp.asarray, kernels)),
                               list(map(jnp.asarray, biases)), strides))  # fmt: skip
    want = x
    for kernel, bias, stride in zip(kernels, biases, strides, strict=True):
        want = _explicit_layer(want, kernel, bias, stride)
    assert got.shape == (3, 3, 5, 11)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_no_layers_is_the_identity_and_odd_sides_are_refused():
    x = jnp.ones((2, 6, 6, 1))
    assert conv_stem(x, [], [], []) is x
    with pytest.raises(ValueError, match="3x3 feature map cannot be halved"):
        conv_stem(x, [jnp.ones((3, 3, 1, 2))] * 2, [jnp.zeros(2)] * 2, [2, 2])
    assert stem_layout(1, 3, 16) == [(16, 1), (16, 2), (32, 2), (64, 2)]


def test_a_model_with_a_stem_keeps_the_grid_of_its_patch_size():
    cfg = VitConfig.tiny(
        image_height=12, image_width=20, channels=3, patch_size=4, stem_layers=2,
        stem_channels=6, stem_full_res_layers=1, d_model=16, num_heads=2, num_classes=5,
    )  # fmt: skip
    model = VisionTransformer(cfg, rngs=nnx.Rngs(0))
    shapes = [(3, 3, 3, 6), (3, 3, 6, 6), (3, 3, 6, 12)]
    assert [k.shape for k in model.stem_kernels] == shapes
    assert model.patch_kernel.shape == (1, 1, 12, 16)  # patches of 4 / 2^2 of the stem's output
    assert model.embed(jnp.ones((2, 12, 20, 3))).shape == (2, 1 + 3 * 5, 16)

    # The stem is trained with the rest: one gradient step moves its kernels.
    images = jnp.asarray(np.random.default_rng(1).random((4, 12, 20, 3)), jnp.float32)
    labels = jnp.arange(4) % 5

    def loss(m):
        logits = m(images)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1).mean()

    model.head_kernel[...] = jax.random.normal(jax.random.key(2), model.head_kernel.shape)
    grads = nnx.grad(loss)(model)
    assert float(jnp.abs(grads.stem_kernels[0][...]).max()) > 0


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(stem_layers=3), "patch_size=4 must be a multiple of 8; use at most 2 stem layers"),
        (dict(stem_layers=-1), "stem_layers=-1 and stem_full_res_layers=0 must be >= 0"),
        (dict(stem_layers=1, stem_channels=0), "stem_channels=0 positive"),
    ],
)
def test_bad_stems_name_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        VitConfig.tiny(image_height=12, image_width=12, patch_size=4, **overrides)
