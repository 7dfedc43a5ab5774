"""The Vision Transformer classifier: patches -> encoder blocks -> [CLS] (or mean) -> head.

x_0 = [x_cls; W p_1 + b; ...; W p_N + b] + E_pos (eq. 1 of Dosovitskiy et al. 2020; with
`stem_layers`, the patches p_n are cut from a convolutional stem's output), then
pre-LN blocks from `transformer_jax.nn` (bidirectional, nothing masked: every image has all its
patches), a final LayerNorm, and a linear head on the `[CLS]` output or on the mean of the patch
outputs. The head starts at zero, as in ViT, so every class starts equally likely.

Letters: B batch, H height, W width, C channels, P patch, N patches, T tokens (N, +1 with
[CLS]), D model dim, K classes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float

from transformer_jax.models.fields import block_spec
from transformer_jax.models.vit.config import VitConfig
from transformer_jax.nn import Stack, dropout, fold
from transformer_jax.nn.conv_stem import STEM_KERNEL, conv_stem
from transformer_jax.nn.layers import param
from transformer_jax.nn.patches import embed_patches_conv, sincos_2d
from transformer_jax.sharding import constrain_batch

_ZEROS = jax.nn.initializers.zeros


class VisionTransformer(nnx.Module):
    """ViT: class logits of images `[B, H, W, C]` (float, e.g. pixels in [0, 1]).

    Example:
      >>> model = VisionTransformer(VitConfig.vit_b16(), rngs=nnx.Rngs(0))
      >>> logits = model(images)  # [B, 1000]
    """

    def __init__(self, cfg: VitConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        p, c, d = cfg.stem_patch, cfg.channels, cfg.d_model
        # The stem's convolutions (He normal, for the ReLU after each), if any.
        he = jax.nn.initializers.he_normal(in_axis=(0, 1, 2), out_axis=3)
        self.stem_kernels, self.stem_biases = nnx.List([]), nnx.List([])
        for width, _ in cfg.stem:
            shape = (STEM_KERNEL, STEM_KERNEL, c, width)
            self.stem_kernels.append(param(he, rngs.params(), shape, (None,) * 4))
            self.stem_biases.append(param(_ZEROS, rngs.params(), (width,), (None,)))
            c = width
        # The patch projection W (fan-in P*P*C, LeCun normal as in ViT) and its bias b.
        lecun = jax.nn.initializers.lecun_normal(in_axis=(0, 1, 2), out_axis=3)
        self.patch_kernel = param(lecun, rngs.params(), (p, p, c, d), (None, None, None, "embed"))
        self.patch_bias = param(_ZEROS, rngs.params(), (d,), ("embed",))
        self.cls_token = (
            param(_ZEROS, rngs.params(), (d,), ("embed",)) if cfg.pool == "cls" else None
        )
        tokens = cfg.num_patches + (cfg.pool == "cls")
        self.pos_embed = (
            param(jax.nn.initializers.normal(0.02), rngs.params(), (tokens, d), (None, "embed"))
            if cfg.position_embedding == "learned"
            else None
        )
        self.encoder = Stack(block_spec(cfg, causal=False, cross_attention=False), cfg.num_layers,
                             rngs=rngs)  # fmt: skip
        self.head_kernel = param(_ZEROS, rngs.params(), (d, cfg.num_classes), ("embed", None))
        self.head_bias = param(_ZEROS, rngs.params(), (cfg.num_classes,), (None,))

    def check_images(self, images: jax.Array) -> None:
        """Raises when `images` is not `[B, H, W, C]` with the model's H, W, C."""
        if images.ndim != 4 or tuple(images.shape[1:]) != self.cfg.image_shape:
            h, w, c = self.cfg.image_shape
            raise ValueError(
                f"VisionTransformer: images have shape {tuple(images.shape)}, but the model reads "
                f"[batch, {h}, {w}, {c}] (VitConfig.image_height, image_width, channels; its "
                f"position embeddings are learned for a {self.cfg.grid[0]}x{self.cfg.grid[1]} "
                f"grid of {self.cfg.patch_size}-pixel patches). Resize the images to {h}x{w} "
                f"with {c} channel(s)."
            )

    def embed(self, images: Float[Array, "B H W C"]) -> Float[Array, "B T D"]:
        """The input sequence: [CLS] (if pooled by it) and the projected patches, plus positions.

        Patches are in row-major order; position t of the sequence is patch t - 1 with [CLS].
        """
        self.check_images(images)
        dtype = self.cfg.compute_dtype
        x = conv_stem(
            images.astype(dtype),
            [k[...].astype(dtype) for k in self.stem_kernels],
            [b[...].astype(dtype) for b in self.stem_biases],
            [stride for _, stride in self.cfg.stem],
        )  # [B, H / 2^k, W / 2^k, C'] (the images themselves without a stem)
        x = embed_patches_conv(
            x,
            self.patch_kernel[...].astype(dtype),
            self.patch_bias[...].astype(dtype),
        )  # [B, N, D]
        if self.cfg.position_embedding == "sincos2d":
            x = x + sincos_2d(*self.cfg.grid, self.cfg.d_model).astype(dtype)
        if self.cls_token is not None:
            cls = jnp.broadcast_to(self.cls_token[...].astype(dtype), (x.shape[0], 1, x.shape[2]))
            x = jnp.concatenate([cls, x], axis=1)
        if self.pos_embed is not None:
            x = x + self.pos_embed[...].astype(dtype)[None]
        return x

    def encode(
        self,
        images: Float[Array, "B H W C"],
        *,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_attention: bool = True,
    ) -> tuple[Float[Array, "B T D"], list[Float[Array, "B N T T"]]]:
        """(final hidden states, each layer's self-attention weights `[B, heads, T, T]`; an
        empty list without `return_attention`, which lets the attention kernel run)."""
        if not deterministic and rng is None:
            raise ValueError(
                "VisionTransformer: deterministic=False (dropout on) needs rng=<PRNG key>."
            )
        x = dropout(self.embed(images), self.cfg.dropout_rate, fold(rng, 0), deterministic)
        hidden, weights = self.encoder(
            constrain_batch(x),
            None,
            rng=fold(rng, 1),
            deterministic=deterministic,
            return_weights=return_attention,
        )
        return hidden, [w["self"] for w in weights] if return_attention else []

    def pool(self, hidden: Float[Array, "B T D"]) -> Float[Array, "B D"]:
        """The image as one vector: the [CLS] output, or the mean of the patch outputs."""
        return hidden[:, 0] if self.cfg.pool == "cls" else hidden.mean(axis=1)

    def head(self, pooled: Float[Array, "B D"]) -> Float[Array, "B K"]:
        """Class logits (float32)."""
        kernel = self.head_kernel[...].astype(pooled.dtype)
        logits = jnp.einsum("BD,DK->BK", pooled, kernel, preferred_element_type=jnp.float32)
        return logits + self.head_bias[...]

    def __call__(
        self,
        images: Float[Array, "B H W C"],
        *,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_attention: bool = False,
    ):
        """Class logits `[B, K]`; with `return_attention=True` also the per-layer weights."""
        hidden, weights = self.encode(
            images, rng=rng, deterministic=deterministic, return_attention=return_attention
        )
        logits = self.head(self.pool(hidden))
        return (logits, weights) if return_attention else logits
