"""Flax NNX layers without attention: LayerNorm, token embedding, position-wise feed-forward.

Letters: B batch, L any length, D model dim, F feed-forward dim, V vocabulary.

Every parameter carries `logical_axes` metadata (names from `transformer_jax.sharding`): the
sharding rules map those names to mesh axes, so the same model runs data-parallel, FSDP or
tensor-parallel without a code change.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Float, Int

from transformer_jax.nn.precision import einsum_f32_out
from transformer_jax.sharding import target_platform

xavier_uniform = jax.nn.initializers.xavier_uniform


# FFN non-linearities by config name. "gelu" is exact (erf), as in BERT and ViT; "gelu_tanh" is
# the tanh approximation of Hendrycks & Gimpel (2016) that GPT-2 uses; "silu" is x * sigmoid(x)
# (also called swish), as in Marian's OPUS-MT models.
ACTIVATIONS = {
    "relu": jax.nn.relu,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "silu": jax.nn.silu,
}


# The multiple the vocabulary axis of the output products is padded to, per platform: GPU
# tensor cores take tiles of 128 (a row of 50,257 bfloat16 logits is not even 16-byte aligned).
# TPUs lay arrays out in tiles of 128 already, and their compiler (libtpu 0.0.42) fails on the
# padded table of an FSDP-sharded step; on CPUs padding only adds work.
VOCAB_MULTIPLE = {"gpu": 128}


def padded_vocab(vocab: int, platform: str | None = None) -> int:
    """`vocab` rounded up to `VOCAB_MULTIPLE` of `platform` (default: the traced program's)."""
    multiple = VOCAB_MULTIPLE.get(platform or target_platform(), 1)
    return -(-vocab // multiple) * multiple


def vocab_logits(
    equation: str, x: Float[Array, "B L D"], w: Float[Array | np.ndarray, "_ _"], vocab_axis: int
) -> Float[Array, "B L V"]:
    """float32 logits `einsum_f32_out(equation, x, w)` over `w`'s vocabulary axis, computed with
    that axis padded with zeros to `padded_vocab` and the padding cut off the result: the
    matrix products (forward and backward) get aligned shapes, everything after them (loss,
    sampling, beam search) the real vocabulary, and the parameters keep their shape."""
    vocab = w.shape[vocab_axis]
    extra = padded_vocab(vocab) - vocab
    if extra:
        pad = [(0, 0)] * w.ndim
        pad[vocab_axis] = (0, extra)
        w = jnp.pad(w, pad)
    logits = einsum_f32_out(equation, x, w)
    return logits[..., :vocab] if extra else logits


def param(init, key, shape, axes) -> nnx.Param:
    """A float32 parameter initialised by `init`, carrying its logical axis names for sharding."""
    return nnx.Param(init(key, shape, jnp.float32), logical_axes=axes)


class LayerNorm(nnx.Module):
    """Layer normalization over the last axis, computed in float32."""

    def __init__(self, dim: int, *, eps: float = 1e-6, dtype=jnp.float32):
        self.scale = nnx.Param(jnp.ones((dim,), jnp.float32), logical_axes=("embed",))
        self.bias = nnx.Param(jnp.zeros((dim,), jnp.float32), logical_axes=("embed",))
        self.eps = eps
        self.dtype = dtype

    def __call__(self, x: Float[Array, "*B D"]) -> Float[Array, "*B D"]:
        x32 = x.astype(jnp.float32)
        centered = x32 - x32.mean(-1, keepdims=True)
        var = jnp.square(centered).mean(-1, keepdims=True)
        # A division, not a multiplication by rsqrt: in the backward pass of a pre-LN stack the
        # residual gradient is otherwise a chain of cheap element-wise ops through every layer,
        # which XLA on CPU re-computes inside each layer's fusions (quadratic in depth); a
        # full-size division is "expensive" to XLA, so the chain is materialised once per layer.
        y = centered / jnp.sqrt(var + self.eps)
        return (y * self.scale[...] + self.bias[...]).astype(self.dtype)


class Embedding(nnx.Module):
    """Token embedding, usable as the tied output projection.

    By default scaled by sqrt(d_model) (§3.4) with std d_model^-0.5 weights, so that inputs
    have unit variance; `scaled=False` gives GPT's unscaled embedding with std `stddev`.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        *,
        scaled: bool = True,
        stddev: float = 0.02,
        dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        init = jax.nn.initializers.normal(stddev=d_model**-0.5 if scaled else stddev)
        self.embedding = param(init, rngs.params(), (vocab_size, d_model), ("vocab", "embed"))
        self.scale = float(d_model) ** 0.5 if scaled else 1.0
        self.dtype = dtype

    def __call__(self, tokens: Int[Array, "B L"]) -> Float[Array, "B L D"]:
        table = self.embedding[...]
        return (jnp.take(table, tokens, axis=0) * self.scale).astype(self.dtype)

    def attend(
        self, x: Float[Array, "B L D"], transposed: Float[Array, "D V"] | None = None
    ) -> Float[Array, "B L V"]:
        """Pre-softmax logits x E^T with the embedding matrix tied (§3.4); float32 output.

        `transposed`: E^T as `transposed_table()` made it before a decoding loop, read in place
        of the table (the same numbers, laid out for a few rows per step).
        """
        if transposed is not None:
            table = transposed.astype(self.dtype)
            return jnp.einsum("BLD,DV->BLV", x, table, preferred_element_type=jnp.float32)
        return vocab_logits("BLD,VD->BLV", x.astype(self.dtype), self.embedding[...], 0)

    def transposed_table(self) -> Float[Array, "D V"]:
        """E^T `[D, V]`, made once before a decoding loop: at a few rows per step XLA's CPU
        matmul reads this layout faster than `[V, D]` (figures: docs/performance.md)."""
        return self.embedding[...].T


class FeedForward(nnx.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3, eq. 2); another of `ACTIVATIONS` as an option."""

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        *,
        activation: str = "relu",
        dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"FeedForward activation must be one of {tuple(ACTIVATIONS)}, got {activation!r}."
            )
        zeros = jax.nn.initializers.zeros
        self.w1 = param(xavier_uniform(), rngs.params(), (d_model, d_ff), ("embed", "mlp"))
        self.b1 = param(zeros, rngs.params(), (d_ff,), ("mlp",))
        self.w2 = param(xavier_uniform(), rngs.params(), (d_ff, d_model), ("mlp", "embed"))
        self.b2 = param(zeros, rngs.params(), (d_model,), ("embed",))
        self.activation = activation
        self.dtype = dtype

    def __call__(self, x: Float[Array, "B L D"]) -> Float[Array, "B L D"]:
        dt = self.dtype
        h = jnp.einsum("BLD,DF->BLF", x.astype(dt), self.w1[...].astype(dt))
        h = h + self.b1[...].astype(dt)
        h = ACTIVATIONS[self.activation](h)
        y = jnp.einsum("BLF,FD->BLD", h, self.w2[...].astype(dt))
        return y + self.b2[...].astype(dt)
