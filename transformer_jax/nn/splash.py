"""Splash attention (Pallas's flash attention for TPUs) under the models' masks.

`splash_attention` computes what `attention.dot_product_attention` computes (no dropout, no
weights) without materialising the `[B, N, T, S]` scores: the kernel walks blocks of queries
and keys in the TPU's fast memory and skips blocks a causal mask rules out.

The kernel takes a per-row mask only as segment ids (query t may attend to key s iff their
ids are equal) and a static causal or full mask, so the models' masks are mapped onto those:

- no mask: full attention;
- a key mask `[B, 1, 1, S]` (padding, BERT, cross-attention, left-padded prompts): real keys
  get id 1, masked keys id -1, every query id 1;
- `attention.Segments` (packed rows): the rows' own ids, keys of segment 0 (padding) -1;
- `is_causal`: the kernel's causal mask, combined with either of the above.

Lengths are padded to a multiple of `LENGTH_MULTIPLE` (the kernel's blocks are multiples of
the TPU's 128 lanes): added keys get id -2, which no query has, and added queries are dropped.
A query with no key it may attend to gets 0, as in the reference.

Letters: B batch, T query length, S key length, N heads, H head dim.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.splash_attention import (
    splash_attention_kernel as splash_kernel,
)
from jax.experimental.pallas.ops.tpu.splash_attention import (
    splash_attention_mask as splash_mask,
)
from jax.sharding import PartitionSpec
from jaxtyping import Array, Float, Int

from transformer_jax import sharding as shd

LENGTH_MULTIPLE = 128  # Query and key lengths are padded to a multiple of this.
BLOCKS = (512, 256, 128)  # Block sizes tried, largest first: the largest that divides a length.
# Segment ids no real query has: keys a mask rules out, and the padding of keys and queries.
MASKED_KEY, _ADDED_KEY, _ADDED_QUERY = -1, -2, -3


class SplashUnsupported(ValueError):
    """The inputs are of a kind the splash kernel cannot take (the reason says which)."""


def padded_length(length: int) -> int:
    """`length` rounded up to a multiple of `LENGTH_MULTIPLE`."""
    return -(-length // LENGTH_MULTIPLE) * LENGTH_MULTIPLE


def block_size(length: int) -> int:
    """The largest of `BLOCKS` that divides `length` (a multiple of `LENGTH_MULTIPLE`)."""
    return next(b for b in BLOCKS if length % b == 0)


def block_sizes(q_len: int, kv_len: int) -> splash_kernel.BlockSizes:
    """Forward and backward block sizes for padded lengths `q_len` and `kv_len`: blocks as
    large as the lengths allow (up to 512), so each grid step does more work per load."""
    queries = ("block_q", "block_q_dkv", "block_q_dq")
    keys = ("block_kv", "block_kv_compute", "block_kv_dkv", "block_kv_dkv_compute", "block_kv_dq")
    return splash_kernel.BlockSizes(
        **dict.fromkeys(queries, block_size(q_len)), **dict.fromkeys(keys, block_size(kv_len))
    )


def splash_attention(
    query: Float[Array, "B T N H"],
    key: Float[Array, "B S N H"],
    value: Float[Array, "B S N H"],
    *,
    q_segments: Int[Array, "#B T"] | None = None,
    kv_segments: Int[Array, "#B S"] | None = None,
    is_causal: bool = False,
    interpret: bool = False,
) -> Float[Array, "B T N H"]:
    """softmax(Q K^T / sqrt(H)) V by the splash kernel, per head (§3.2.1).

    Args:
      query, key, value: `[B, T, N, H]`, `[B, S, N, H]`, `[B, S, N, H]`.
      q_segments, kv_segments: query t may attend to key s iff `q_segments[b, t] ==
        kv_segments[b, s]`; None: every query (key) has id 1. Real queries have ids >= 0;
        keys no query may see have `MASKED_KEY` (`attention.splash_segments` maps masks).
      is_causal: also mask keys after each query (self-attention, T = S).
      interpret: run the kernel in Pallas's interpret mode (any backend; for tests on CPU).

    Returns:
      `[B, T, N, H]` in the query's dtype.

    Raises:
      SplashUnsupported: causal attention with T != S.
    """
    b, t, n, h = query.shape
    s = key.shape[1]
    if is_causal and t != s:
        raise SplashUnsupported(f"causal attention needs T = S, got {t} queries and {s} keys")
    tp, sp = padded_length(t), padded_length(s)
    scale = 1.0 / math.sqrt(h)
    q = (query * jnp.asarray(scale, query.dtype)).swapaxes(1, 2)  # [B, N, T, H]
    k, v = key.swapaxes(1, 2), value.swapaxes(1, 2)
    segmented = q_segments is not None or kv_segments is not None or (tp, sp) != (t, s)
    q_ids = kv_ids = None
    if segmented:
        q_ids = _ids(q_segments, b, t, tp, _ADDED_QUERY)
        kv_ids = _ids(kv_segments, b, s, sp, _ADDED_KEY)
        q = _pad_length(q, tp)
        k, v = _pad_length(k, sp), _pad_length(v, sp)
    run = functools.partial(_run_kernel, is_causal=is_causal, interpret=interpret)
    scope = "splash_attention_causal" if is_causal else "splash_attention_full"
    with jax.named_scope(scope):
        out = _sharded(run, q, k, v, q_ids, kv_ids)
    return out[:, :, :t].swapaxes(1, 2)


def _ids(ids, batch: int, length: int, padded: int, added: int) -> Int[Array, "B L"]:
    """Segment ids `[B, padded]`: the given ones (ones if None), then `added` in the padding."""
    ids = jnp.ones((batch, length), jnp.int32) if ids is None else ids.astype(jnp.int32)
    ids = jnp.broadcast_to(ids, (batch, length))
    return jnp.pad(ids, ((0, 0), (0, padded - length)), constant_values=added)


def _pad_length(x: Float[Array, "B N L H"], padded: int) -> Float[Array, "B N P H"]:
    return jnp.pad(x, ((0, 0), (0, 0), (0, padded - x.shape[2]), (0, 0)))


def _sharded(run, q, k, v, q_ids, kv_ids):
    """`run` on each device's rows and heads: the kernel is a custom call the compiler cannot
    split, so under a mesh it runs inside `shard_map` over the batch axes (rows) and the
    tensor axis (heads), which is how the models' activations are laid out."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or mesh.size == 1:
        return run(q, k, v, q_ids, kv_ids)
    batch_axes = tuple(a for a in shd.BATCH_AXES if a in mesh.axis_names)
    heads_axis = "tensor" if "tensor" in mesh.axis_names else None
    rows = math.prod(mesh.shape[a] for a in batch_axes)
    heads = mesh.shape[heads_axis] if heads_axis else 1
    if q.shape[0] % rows or q.shape[1] % heads:
        raise SplashUnsupported(
            f"{q.shape[0]} rows and {q.shape[1]} heads do not split over the mesh's "
            f"{rows} batch devices and {heads} tensor devices"
        )
    qkv = PartitionSpec(batch_axes, heads_axis, None, None)
    ids = PartitionSpec(batch_axes, None)
    specs = (qkv, qkv, qkv, None if q_ids is None else ids, None if kv_ids is None else ids)
    return jax.shard_map(run, in_specs=specs, out_specs=qkv, check_vma=False)(
        q, k, v, q_ids, kv_ids
    )


def _run_kernel(q, k, v, q_ids, kv_ids, *, is_causal: bool, interpret: bool):
    """The kernel over one device's `[B, N, T, H]` queries (vmapped over rows)."""
    _, n, tp, _ = q.shape
    sp = k.shape[2]
    head = splash_mask.CausalMask((tp, sp)) if is_causal else splash_mask.FullMask((tp, sp))
    kernel = splash_kernel.make_splash_mha(
        splash_mask.MultiHeadMask([head] * n),
        block_sizes=block_sizes(tp, sp),
        head_shards=1,
        q_seq_shards=1,
        interpret=interpret,
    )
    if q_ids is None:
        return jax.vmap(kernel)(q, k, v)
    return jax.vmap(kernel)(q, k, v, splash_kernel.SegmentIds(q_ids, kv_ids))
