"""Multi-head attention (§3.2.2) and its decoding caches: the one KV-cache implementation.

Every decoder (encoder-decoder or decoder-only) caches through this module, so the cache layout
is written once, here:

- `KVCache`: self-attention keys/values of the positions decoded so far, filled `T >= 1`
  positions per call (a whole prompt at once, then one token per step).
- `MemoryKV`: keys/values of a fixed memory (the encoder output for cross-attention), projected
  once before decoding and read at every step.

Both store keys and values heads first, `[B, N, C, H]`: the attention matmuls batch over
(B, N), so this is the layout they read without a transpose of the whole cache at every step.

Letters: B batch (rows), T query length, S key/value length, C cache length, N heads, H head dim,
D model dim.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from absl import logging
from flax import nnx, struct
from jaxtyping import Array, Bool, Float, Int

from transformer_jax.nn.attention import (
    Mask,
    causal_mask,
    check_kernel,
    combine_masks,
    dot_product_attention,
    heads_first_attention,
    is_key_mask,
    kernel_attention,
    resolve_kernel,
)
from transformer_jax.nn.layers import param, xavier_uniform


@struct.dataclass
class KVCache:
    """Self-attention keys and values of one layer, `[B, N, C, H]`, and the next free position.

    Position `index + t` of a `T`-token update may attend to cached positions `0 .. index + t`:
    the cache itself is the causal mask (§3.2.3).
    """

    key: Float[Array, "B N C H"]
    value: Float[Array, "B N C H"]
    index: Int[Array, ""]

    @classmethod
    def empty(cls, batch: int, length: int, num_heads: int, head_dim: int, dtype) -> KVCache:
        """An empty cache for `length` positions."""
        zeros = jnp.zeros((batch, num_heads, length, head_dim), dtype)
        return cls(key=zeros, value=zeros, index=jnp.zeros((), jnp.int32))

    def update(
        self, key: Float[Array, "B T N H"], value: Float[Array, "B T N H"]
    ) -> tuple[KVCache, Bool[Array, "1 1 T C"]]:
        """Writes `T` new positions at `index`; returns the new cache and their causal mask."""
        start = (0, 0, self.index, 0)

        def write(cache, new):  # Only the T new positions are transposed.
            return jax.lax.dynamic_update_slice(
                cache, new.swapaxes(1, 2).astype(cache.dtype), start
            )

        new = KVCache(
            key=write(self.key, key),
            value=write(self.value, value),
            index=self.index + key.shape[1],
        )
        query_pos = self.index + jnp.arange(key.shape[1])  # [T]
        live = jnp.arange(self.key.shape[2])[None, :] <= query_pos[:, None]  # [T, C]
        return new, live[None, None]

    def reorder(self, rows: Int[Array, " R"]) -> KVCache:
        """The cache of `rows` (beam search: each new beam continues its parent's prefix)."""
        return self.replace(key=self.key[rows], value=self.value[rows])

    def grow(self, length: int) -> KVCache:
        """The same cache with room for `length` positions (empty slots appended)."""
        extra = length - self.key.shape[2]
        if extra < 0:
            raise ValueError(f"cannot shrink a cache of {self.key.shape[2]} positions to {length}.")
        pad = ((0, 0), (0, 0), (0, extra), (0, 0))
        return self.replace(key=jnp.pad(self.key, pad), value=jnp.pad(self.value, pad))


@struct.dataclass
class MemoryKV:
    """Keys and values of a fixed memory, `[B, N, S, H]`, projected once (cross-attention).

    One row per input, however many rows decode it: beam search's K beams of an input (rows
    `b * K .. b * K + K - 1`) all read row `b`, so the memory is neither copied K times nor
    read K times per step.
    """

    key: Float[Array, "B N S H"]
    value: Float[Array, "B N S H"]

    def reorder(self, rows: Int[Array, " R"]) -> MemoryKV:
        """Unchanged: beam search reorders rows only among the beams of one input, which share
        their memory, so nothing needs to move."""
        del rows
        return self


_CACHES = (KVCache, MemoryKV)


def reorder_cache(cache: Any, rows: Int[Array, " R"]) -> Any:
    """Reorders every `KVCache` in a pytree of caches; everything else is per input and kept."""
    return jax.tree.map(
        lambda c: c.reorder(rows) if isinstance(c, _CACHES) else c,
        cache,
        is_leaf=lambda c: isinstance(c, _CACHES),
    )


def grow_cache(cache: Any, length: int) -> Any:
    """Every `KVCache` in a pytree of caches given room for `length` positions."""
    return jax.tree.map(
        lambda c: c.grow(length) if isinstance(c, KVCache) else c,
        cache,
        is_leaf=lambda c: isinstance(c, _CACHES),
    )


def repeat_cache(cache: Any, copies: int) -> Any:
    """Every `KVCache` row repeated `copies` times in place (row b -> rows b*copies ..); memory
    and everything else stay one row per input (beam search starts K beams per input)."""
    if copies == 1:
        return cache
    return jax.tree.map(
        lambda c: (
            jax.tree.map(lambda x: jnp.repeat(x, copies, axis=0) if jnp.ndim(x) else x, c)
            if isinstance(c, KVCache)
            else c
        ),
        cache,
        is_leaf=lambda c: isinstance(c, _CACHES),
    )


@functools.lru_cache(maxsize=8)
def log_dropout_cost(kernel: str, rate: float) -> None:
    """Says once per kernel and rate that attention dropout keeps the fused kernel out."""
    logging.warning(
        "attention: dropout %g on the attention weights runs the written-out attention in "
        "training (%s has no dropout): the [B, N, T, S] weights are materialised. Set "
        "model.attention_dropout_rate=0 to train on %s (docs/performance.md).",
        rate,
        kernel,
        kernel,
    )


class MultiHeadAttention(nnx.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W_i^Q, ...) (§3.2.2).

    The per-head projections W_i^Q are stored together as one `[D, N, H]` kernel. With
    `use_bias`, queries, values and the output get biases; keys never do: a key bias adds the
    same amount q.b to every logit of a query, which the softmax cancels, so its gradient is
    zero and Adam would only turn rounding noise into updates.

    `attention_kernel` (see `transformer_jax.nn.attention.ATTENTION_KERNELS`) says how attention
    is computed when its weights are not returned and no dropout falls on them; otherwise the
    reference equation runs.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        *,
        use_bias: bool = True,
        dropout_rate: float = 0.0,
        dtype=jnp.float32,
        attention_kernel: str = "auto",
        rngs: nnx.Rngs,
    ):
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}.")
        n, h = num_heads, d_model // num_heads
        in_init = xavier_uniform(in_axis=0, out_axis=(1, 2))
        out_init = xavier_uniform(in_axis=(0, 1), out_axis=2)
        axes = ("embed", "heads", "kv")
        self.query = param(in_init, rngs.params(), (d_model, n, h), axes)
        self.key = param(in_init, rngs.params(), (d_model, n, h), axes)
        self.value = param(in_init, rngs.params(), (d_model, n, h), axes)
        self.out = param(out_init, rngs.params(), (n, h, d_model), ("heads", "kv", "embed"))
        self.use_bias = use_bias
        if use_bias:
            zeros = jax.nn.initializers.zeros
            self.query_bias = param(zeros, rngs.params(), (n, h), ("heads", "kv"))
            self.value_bias = param(zeros, rngs.params(), (n, h), ("heads", "kv"))
            self.out_bias = param(zeros, rngs.params(), (d_model,), ("embed",))
        self.num_heads, self.head_dim = n, h
        self.dropout_rate = dropout_rate
        self.dtype = dtype
        self.attention_kernel = check_kernel(attention_kernel)  # resolved when traced

    def _project(self, x, kernel, bias_name):
        y = jnp.einsum("BLD,DNH->BLNH", x.astype(self.dtype), kernel[...].astype(self.dtype))
        if self.use_bias and bias_name:
            y = y + getattr(self, bias_name)[...].astype(self.dtype)
        return y

    def key_value(
        self, x_kv: Float[Array, "B S D"]
    ) -> tuple[Float[Array, "B S N H"], Float[Array, "B S N H"]]:
        """K W^K and V W^V for every head."""
        return self._project(x_kv, self.key, None), self._project(x_kv, self.value, "value_bias")

    def attend(
        self,
        x_q: Float[Array, "B T D"],
        k: Float[Array, "B S N H"],
        v: Float[Array, "B S N H"],
        mask: Mask | None = None,
        *,
        is_causal: bool = False,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_weights: bool = True,
    ) -> tuple[Float[Array, "B T D"], Float[Array, "B N T S"] | None]:
        """Attention of the queries from `x_q` over already-projected keys and values.

        `is_causal` adds the causal mask (self-attention, T = S). Returns the output `[B, T, D]`
        and the attention weights `[B, N, T, S]`, or None for them when `return_weights` is
        False, which lets the attention kernel run.
        """
        q = self._project(x_q, self.query, "query_bias")
        dropping = not deterministic and self.dropout_rate > 0.0
        kernel = resolve_kernel(self.attention_kernel, self.dtype)
        if dropping and not return_weights and kernel in ("splash", "cudnn"):
            log_dropout_cost(kernel, self.dropout_rate)
        if not (return_weights or dropping or kernel == "reference"):
            heads = kernel_attention(q, k, v, mask, is_causal=is_causal, implementation=kernel)
            return self._output(heads), None
        if is_causal:
            mask = combine_masks(causal_mask(x_q.shape[1]), mask)
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
        return self._output(heads), weights if return_weights else None

    def _output(self, heads: Float[Array, "B T N H"]) -> Float[Array, "B T D"]:
        """Concat(head_1..head_h) W^O (+ bias)."""
        out = jnp.einsum("BTNH,NHD->BTD", heads, self.out[...].astype(self.dtype))
        if self.use_bias:
            out = out + self.out_bias[...].astype(self.dtype)
        return out

    def __call__(
        self,
        x_q: Float[Array, "B T D"],
        x_kv: Float[Array, "B S D"],
        mask: Mask | None = None,
        *,
        is_causal: bool = False,
        rng: jax.Array | None = None,
        deterministic: bool = True,
        return_weights: bool = True,
    ) -> tuple[Float[Array, "B T D"], Float[Array, "B N T S"] | None]:
        """Self-attention when `x_kv is x_q`, encoder-decoder attention when `x_kv` is memory.

        Returns the output `[B, T, D]` and the attention weights `[B, N, T, S]` (None unless
        `return_weights`; see `attend`).
        """
        k, v = self.key_value(x_kv)
        return self.attend(
            x_q,
            k,
            v,
            mask,
            is_causal=is_causal,
            rng=rng,
            deterministic=deterministic,
            return_weights=return_weights,
        )

    # ---------------------------------------------------------------------------- decoding
    def init_cache(self, batch: int, length: int) -> KVCache:
        """An empty self-attention cache for `length` positions."""
        return KVCache.empty(batch, length, self.num_heads, self.head_dim, self.dtype)

    def memory(self, x_kv: Float[Array, "B S D"]) -> MemoryKV:
        """The keys and values of a fixed memory, projected and laid out heads first once for
        every decoding step."""
        k, v = self.key_value(x_kv)
        return MemoryKV(k.swapaxes(1, 2), v.swapaxes(1, 2))

    def cached(
        self,
        x_q: Float[Array, "B T D"],
        cache: KVCache | MemoryKV,
        mask: Bool[Array, "#M #N #T #S"] | None = None,
    ) -> tuple[Float[Array, "B T D"], KVCache | MemoryKV]:
        """Inference-time attention through a cache; returns the output and the new cache.

        With a `KVCache`, `x_q` holds the next `T` positions: their keys/values are written to
        the cache and each attends causally to everything cached so far (and to `mask`, e.g.
        the padding of a prompt). With a `MemoryKV` of `B` inputs, `x_q` attends to the memory
        under `mask`; it may hold `G` consecutive rows per input (beam search's beams). `mask`
        has M = B rows with a `KVCache`, one row per input (or 1) with a `MemoryKV`.
        """
        if isinstance(cache, MemoryKV):
            return self._output(self._memory_attention(x_q, cache, mask)), cache
        k, v = self.key_value(x_q)
        new, live = cache.update(k, v)
        q = self._project(x_q, self.query, "query_bias")

        def through_cache():
            return heads_first_attention(q, new.key, new.value, combine_masks(live, mask))

        if x_q.shape[1] > 1 and self._prefill_kernel(mask):
            # A prompt written into an empty cache attends only to itself: a causal
            # self-attention over its own keys, which the kernel runs without the cache.
            def prompt_only():
                own = None if mask is None else mask[..., : x_q.shape[1]]
                return kernel_attention(q, k, v, own, is_causal=True, implementation="splash")

            heads = jax.lax.cond(cache.index == 0, prompt_only, through_cache)
        else:
            heads = through_cache()
        return self._output(heads), new

    def _prefill_kernel(self, mask) -> bool:
        """Whether a prompt's first pass runs the splash kernel (TPUs; a mask over keys only)."""
        kernel = resolve_kernel(self.attention_kernel, self.dtype)
        return kernel == "splash" and (mask is None or is_key_mask(mask))

    def _memory_attention(
        self, x_q: Float[Array, "R T D"], memory: MemoryKV, mask: Mask | None
    ) -> Float[Array, "R T N H"]:
        """Queries of `R = G * B` rows over the memory of `B` inputs: the `G` consecutive rows
        of an input (its beams) are attended as `G * T` queries of that input's row. `mask`
        has `B` rows (or 1) and no per-query axis (`[B, 1, 1, S]`)."""
        q = self._project(x_q, self.query, "query_bias")
        rows, length, n, h = q.shape
        inputs = memory.key.shape[0]
        if rows % inputs:
            raise ValueError(
                f"{rows} query rows cannot share the memory of {inputs} inputs: the rows must "
                "be a whole number of copies of each input (beams in consecutive rows)."
            )
        grouped = q.reshape(inputs, rows // inputs * length, n, h)
        heads = heads_first_attention(grouped, memory.key, memory.value, mask)
        return heads.reshape(rows, length, n, h)
