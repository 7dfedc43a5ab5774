"""Flax NNX building blocks: they hold the parameters and call the pure functions.

Letters: B batch, T query length, S key/value length, L any length, N heads, H head dim,
D model dim, F feed-forward dim, V vocabulary.

Every parameter carries `logical_axes` metadata (names from `transformer_jax.sharding`): the
sharding rules map those names to mesh axes, so the same model runs data-parallel, FSDP or
tensor-parallel without a code change.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float, Int

from transformer_jax.attention import Mask, dot_product_attention

xavier_uniform = jax.nn.initializers.xavier_uniform


def _param(init, key, shape, axes) -> nnx.Param:
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
        mean = x32.mean(-1, keepdims=True)
        var = jnp.square(x32 - mean).mean(-1, keepdims=True)
        y = (x32 - mean) * jax.lax.rsqrt(var + self.eps)
        return (y * self.scale[...] + self.bias[...]).astype(self.dtype)


class Embedding(nnx.Module):
    """Token embedding scaled by sqrt(d_model) (§3.4), usable as the tied output projection."""

    def __init__(self, vocab_size: int, d_model: int, *, dtype=jnp.float32, rngs: nnx.Rngs):
        # std d_model^-0.5, so that the sqrt(d_model) scale gives unit-variance inputs.
        init = jax.nn.initializers.normal(stddev=d_model**-0.5)
        self.embedding = _param(init, rngs.params(), (vocab_size, d_model), ("vocab", "embed"))
        self.scale = float(d_model) ** 0.5
        self.dtype = dtype

    def __call__(self, tokens: Int[Array, "B L"]) -> Float[Array, "B L D"]:
        table = self.embedding[...]
        return (jnp.take(table, tokens, axis=0) * self.scale).astype(self.dtype)

    def attend(self, x: Float[Array, "B L D"]) -> Float[Array, "B L V"]:
        """Pre-softmax logits x E^T with the embedding matrix tied (§3.4); float32 output."""
        table = self.embedding[...].astype(self.dtype)
        return jnp.einsum("BLD,VD->BLV", x, table, preferred_element_type=jnp.float32)


class MultiHeadAttention(nnx.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, ...) (§3.2.2).

    The per-head projections W_i^Q are stored together as one `[D, N, H]` kernel. With
    `use_bias`, queries, values and the output get biases; keys never do: a key bias adds the
    same amount q.b to every logit of a query, which the softmax cancels, so its gradient is
    zero and Adam would only turn rounding noise into updates.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        use_bias: bool = True,
        dropout_rate: float = 0.0,
        dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}.")
        n, h = num_heads, d_model // num_heads
        in_init = xavier_uniform(in_axis=0, out_axis=(1, 2))
        out_init = xavier_uniform(in_axis=(0, 1), out_axis=2)
        axes = ("embed", "heads", "kv")
        self.query = _param(in_init, rngs.params(), (d_model, n, h), axes)
        self.key = _param(in_init, rngs.params(), (d_model, n, h), axes)
        self.value = _param(in_init, rngs.params(), (d_model, n, h), axes)
        self.out = _param(out_init, rngs.params(), (n, h, d_model), ("heads", "kv", "embed"))
        self.use_bias = use_bias
        if use_bias:
            zeros = jax.nn.initializers.zeros
            self.query_bias = _param(zeros, rngs.params(), (n, h), ("heads", "kv"))
            self.value_bias = _param(zeros, rngs.params(), (n, h), ("heads", "kv"))
            self.out_bias = _param(zeros, rngs.params(), (d_model,), ("embed",))
        self.dropout_rate = dropout_rate
        self.dtype = dtype

    def _project(self, x, kernel, bias_name):
        y = jnp.einsum("BLD,DNH->BLNH", x.astype(self.dtype), kernel[...].astype(self.dtype))
        if self.use_bias and bias_name:
            y = y + getattr(self, bias_name)[...].astype(self.dtype)
        return y

    def key_value(
        self, x_kv: Float[Array, "B S D"]
    ) -> tuple[Float[Array, "B S N H"], Float[Array, "B S N H"]]:
        """K W^K and V W^V for every head; the decoder caches these."""
        return self._project(x_kv, self.key, None), self._project(x_kv, self.value, "value_bias")

    def attend(
        self,
        x_q: Float[Array, "B T D"],
        k: Float[Array, "B S N H"],
        v: Float[Array, "B S N H"],
        mask: Mask | None = None,
        *,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_weights: bool = False,
    ):
        """Attention of the queries from `x_q` over already-projected keys and values.

        Returns `[B, T, D]`, or `(output, weights [B, N, T, S])` when `return_weights`.
        """
        q = self._project(x_q, self.query, "query_bias")
        heads, weights = dot_product_attention(
            q,
            k,
            v,
            mask,
            dropout_rate=self.dropout_rate,
            dropout_rng=rng,
            deterministic=deterministic,
            return_weights=True,
        )
        out = jnp.einsum("BTNH,NHD->BTD", heads, self.out[...].astype(self.dtype))
        if self.use_bias:
            out = out + self.out_bias[...].astype(self.dtype)
        return (out, weights) if return_weights else out

    def __call__(
        self,
        x_q: Float[Array, "B T D"],
        x_kv: Float[Array, "B S D"],
        mask: Mask | None = None,
        *,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_weights: bool = False,
    ):
        """Self-attention when `x_kv is x_q`, encoder-decoder attention when `x_kv` is memory."""
        k, v = self.key_value(x_kv)
        return self.attend(
            x_q,
            k,
            v,
            mask,
            rng=rng,
            deterministic=deterministic,
            return_weights=return_weights,
        )


class FeedForward(nnx.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3, eq. 2); GELU instead of ReLU as an option."""

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        *,
        activation: str = "relu",
        dtype=jnp.float32,
        rngs: nnx.Rngs,
    ):
        if activation not in ("relu", "gelu"):
            raise ValueError(
                f"FeedForward activation must be 'relu' or 'gelu', got {activation!r}."
            )
        zeros = jax.nn.initializers.zeros
        self.w1 = _param(xavier_uniform(), rngs.params(), (d_model, d_ff), ("embed", "mlp"))
        self.b1 = _param(zeros, rngs.params(), (d_ff,), ("mlp",))
        self.w2 = _param(xavier_uniform(), rngs.params(), (d_ff, d_model), ("mlp", "embed"))
        self.b2 = _param(zeros, rngs.params(), (d_model,), ("embed",))
        self.activation = activation
        self.dtype = dtype

    def __call__(self, x: Float[Array, "B L D"]) -> Float[Array, "B L D"]:
        dt = self.dtype
        h = jnp.einsum("BLD,DF->BLF", x.astype(dt), self.w1[...].astype(dt))
        h = h + self.b1[...].astype(dt)
        h = jax.nn.relu(h) if self.activation == "relu" else jax.nn.gelu(h)
        y = jnp.einsum("BLF,FD->BLD", h, self.w2[...].astype(dt))
        return y + self.b2[...].astype(dt)
