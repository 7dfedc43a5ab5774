"""Scaled dot-product attention (§3.2.1) and its masks, as pure JAX functions.

Letters used in shapes and einsum strings: B batch, T query length, S key/value length,
N heads, H head dim. Masks are boolean, True where a query may attend to a key, and broadcast
to `[B, N, T, S]`.

Two implementations compute the same function. `dot_product_attention` is the reference: the
equation written out, with attention weights to return and dropout on them. `kernel_attention`
hands the work to a fused kernel (XLA's, cuDNN's flash attention on NVIDIA GPUs, splash
attention on TPUs), which never returns the weights; `attention_kernel` says which a model uses.

Packed rows' masks can stay factored as `Segments` (query and key ids) instead of a dense
`[B, 1, T, S]` array: flash kernels take them so, and the dense form is built only where the
written-out equation needs it (`as_dense`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from absl import logging
from flax import struct
from jaxtyping import Array, Bool, Float, Int

from transformer_jax.nn import splash
from transformer_jax.nn.precision import einsum_f32_out
from transformer_jax.sharding import target_platform


@struct.dataclass
class Segments:
    """The mask of packed rows, factored: query t of row b may attend to key s iff
    `q[b, t] == kv[b, s]` and `kv[b, s] != 0` (segment 0 is padding). The same mask as
    `segment_mask(q, kv)`, without building it."""

    q: Int[Array, "#B T"]
    kv: Int[Array, "#B S"]

    def dense(self) -> Bool[Array, "#B 1 T S"]:
        return segment_mask(self.q, self.kv)


Mask = Bool[Array, "#B #N #T #S"] | Segments

# How a model computes attention when it does not return the weights (a model config field):
# "auto" picks per target platform (`resolve_kernel`), "reference" the written-out equation,
# "xla" and "cudnn" the implementations of `jax.nn.dot_product_attention`, "splash" the Pallas
# flash attention for TPUs (`nn.splash`).
ATTENTION_KERNELS = ("auto", "reference", "xla", "cudnn", "splash")
# The platforms each explicit kernel runs on.
KERNEL_PLATFORMS = {
    "reference": ("cpu", "gpu", "tpu"),
    "xla": ("cpu", "gpu", "tpu"),
    "cudnn": ("gpu",),
    "splash": ("tpu",),
}


def key_mask(attention_mask: Bool[Array, "B S"]) -> Bool[Array, "B 1 1 S"]:
    """Keys a per-token mask marks real (True); broadcasts over heads and queries."""
    return attention_mask[:, None, None, :]


def padding_mask(tokens: Int[Array, "B S"], pad_id: int = 0) -> Bool[Array, "B 1 1 S"]:
    """Keys that are real tokens (not `pad_id`); broadcasts over heads and queries.

    Only for a vocabulary whose `pad_id` is a token of its own that no text encodes to (the
    encoder-decoder's); otherwise say where the padding is with `key_mask`.
    """
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(length: int) -> Bool[Array, "1 1 T T"]:
    """Query t may attend to keys 0..t only (the decoder's left-to-right masking, §3.2.3)."""
    return jnp.tril(jnp.ones((length, length), dtype=bool))[None, None]


def segment_mask(
    q_segment_ids: Int[Array, "B T"], kv_segment_ids: Int[Array, "B S"]
) -> Bool[Array, "B 1 T S"]:
    """For packed rows: a query attends only to keys of its own segment; segment 0 is padding."""
    same = q_segment_ids[:, :, None] == kv_segment_ids[:, None, :]
    return (same & (kv_segment_ids[:, None, :] != 0))[:, None]


def is_key_mask(mask) -> bool:
    """Whether `mask` is a dense mask that varies only along the keys (`[#B, 1, 1, S]`)."""
    return not isinstance(mask, Segments) and mask.shape[1] == 1 and mask.shape[2] == 1


def combine_masks(*masks: Mask | None) -> Mask | None:
    """Logical AND of the given masks, skipping `None`; `None` when none is given.

    `Segments` combined with key masks stay `Segments` (a masked key joins segment 0); with
    any other mask the result is dense.
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    segments = [m for m in present if isinstance(m, Segments)]
    if len(segments) == 1 and all(is_key_mask(m) for m in present if m is not segments[0]):
        out = segments[0]
        for m in present:
            if m is not out:
                out = out.replace(kv=jnp.where(m[:, 0, 0, :], out.kv, 0))
        return out
    present = [as_dense(m) for m in present]
    out = present[0]
    for m in present[1:]:
        out = jnp.logical_and(out, m)
    return out


def as_dense(mask: Mask | None) -> Bool[Array, "#B #N #T #S"] | None:
    """`mask` as a boolean array broadcastable to `[B, N, T, S]`."""
    return mask.dense() if isinstance(mask, Segments) else mask


def dropout(x: Array, rate: float, rng: jax.Array | None, deterministic: bool) -> Array:
    """Inverted dropout: zero each element with probability `rate`, scale the rest by 1/(1-rate)."""
    if deterministic or rate == 0.0:
        return x
    if rng is None:
        raise ValueError("dropout with deterministic=False needs an rng key (pass rng=...).")
    keep = jax.random.bernoulli(rng, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


def masked_softmax(logits: Float[Array, "B N T S"], mask: Mask | None) -> Float[Array, "B N T S"]:
    """softmax over keys of float32 `logits` with masked keys removed.

    Masked logits get the most negative finite value of float32; a query whose keys are all
    masked gets all-zero weights (so its output is 0), never NaN.
    """
    if mask is None:
        return jax.nn.softmax(logits, axis=-1)
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(logits, axis=-1)
    any_key = jnp.any(mask, axis=-1, keepdims=True)
    return jnp.where(any_key, weights, 0.0)


def dot_product_attention_weights(
    query: Float[Array, "B T N H"],
    key: Float[Array, "B S N H"],
    mask: Mask | None = None,
) -> Float[Array, "B N T S"]:
    """softmax(Q K^T / sqrt(d_k)) per head, with masked keys removed (§3.2.1, eq. 1).

    The softmax runs in float32 whatever the input dtype (see `masked_softmax` for masks).
    """
    depth = query.shape[-1]
    logits = einsum_f32_out("BTNH,BSNH->BNTS", query, key) / jnp.sqrt(jnp.float32(depth))
    return masked_softmax(logits, as_dense(mask)).astype(query.dtype)


def heads_first_attention(
    query: Float[Array, "B T N H"],
    key: Float[Array, "B N S H"],
    value: Float[Array, "B N S H"],
    mask: Mask | None = None,
) -> Float[Array, "B T N H"]:
    """`dot_product_attention` (no dropout) over keys and values stored heads first.

    For decoding caches: the logits and output matmuls batch over (B, N), so keys and values in
    `[B, N, S, H]` are read as they lie, where `[B, S, N, H]` makes XLA transpose the whole
    cache at every step. The queries and the output are put heads first too, explicitly (a few
    rows, not the cache): left to XLA, the matmuls of T > 1 queries (the beams that share a
    memory) became transposed batched matmuls, much slower on CPU (docs/performance.md).
    Same result as `dot_product_attention(query, key.swapaxes(1, 2), ...)`.
    """
    depth = query.shape[-1]
    query = query.swapaxes(1, 2)  # [B, N, T, H]
    logits = jnp.einsum("BNTH,BNSH->BNTS", query, key, preferred_element_type=jnp.float32)
    weights = masked_softmax(logits / jnp.sqrt(jnp.float32(depth)), as_dense(mask))
    weights = weights.astype(value.dtype)
    return jnp.einsum("BNTS,BNSH->BNTH", weights, value).swapaxes(1, 2)


def dot_product_attention(
    query: Float[Array, "B T N H"],
    key: Float[Array, "B S N H"],
    value: Float[Array, "B S N H"],
    mask: Mask | None = None,
    *,
    dropout_rate: float = 0.0,
    dropout_rng: jax.Array | None = None,
    deterministic: bool = True,
    return_weights: bool = False,
) -> Float[Array, "B T N H"] | tuple[Float[Array, "B T N H"], Float[Array, "B N T S"]]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, for every head at once (§3.2.1).

    Args:
      query: `[B, T, N, H]`.
      key: `[B, S, N, H]`.
      value: `[B, S, N, H]`.
      mask: boolean, broadcastable to `[B, N, T, S]`, True where attending is allowed.
      dropout_rate: dropout on the attention weights (used only when not deterministic).
      dropout_rng: key for that dropout.
      deterministic: no dropout when True.
      return_weights: also return the weights `[B, N, T, S]` (before dropout).

    Returns:
      `[B, T, N, H]`, or `(output, weights)` when `return_weights`.
    """
    weights = dot_product_attention_weights(query, key, mask)
    dropped = dropout(weights, dropout_rate, dropout_rng, deterministic)
    out = jnp.einsum("BNTS,BSNH->BTNH", dropped, value)
    return (out, weights) if return_weights else out


def resolve_kernel(kernel: str, dtype, platform: str | None = None) -> str:
    """The implementation `kernel` means on `platform` (default: `target_platform()`, the
    platform of the mesh's devices, so a program compiled for a TPU or GPU from a CPU host
    makes its target's choice).

    "auto" is "splash" on TPUs, "cudnn" on GPUs for 16-bit dtypes (cuDNN's flash attention
    takes only those) and "xla" on other GPU runs, and "reference" on CPUs, where XLA's fused
    attention is slower than the written-out equation over a forward and backward pass (see
    benchmarks/attention_kernels.py).

    Raises:
      ValueError: an unknown kernel, or one that does not run on `platform` (naming those
        that do).
    """
    check_kernel(kernel)
    platform = platform or target_platform()
    if kernel == "auto":
        if platform == "gpu":
            return "cudnn" if jnp.dtype(dtype).itemsize == 2 else "xla"
        return "splash" if platform == "tpu" else "reference"
    if platform not in KERNEL_PLATFORMS[kernel]:
        usable = [k for k, where in KERNEL_PLATFORMS.items() if platform in where]
        raise ValueError(
            f"attention_kernel={kernel!r} runs only on {'/'.join(KERNEL_PLATFORMS[kernel])}, "
            f"and this program is for {platform}: use one of {['auto', *usable]} "
            "(--config.model.attention_kernel=auto picks the platform's best)."
        )
    return kernel


def check_dropout_kernel(kernel: str, dropout_rate: float) -> None:
    """Raises when `kernel` is a fused kernel asked for by name and training puts dropout on the
    attention weights, which no fused kernel of the installed jax computes: the run would train
    on the written-out equation instead (what "auto" does, saying so in the log)."""
    if kernel in ("cudnn", "splash") and dropout_rate > 0:
        raise ValueError(
            f"config.model.attention_kernel={kernel!r} with attention_dropout_rate="
            f"{dropout_rate:g}: jax {jax.__version__}'s {_FUSED_NAMES[kernel]} has no dropout "
            "on the attention weights, so training cannot run it; with that dropout only "
            "'reference' (the written-out equation, which 'auto' then picks) applies. Set "
            "--config.model.attention_dropout_rate=0 to train on the fused kernel "
            "(docs/performance.md), or --config.model.attention_kernel=auto."
        )


_FUSED_NAMES = {
    "cudnn": "cuDNN attention (jax.nn.dot_product_attention)",
    "splash": "splash attention",
}


def check_kernel(kernel: str) -> str:
    """`kernel` if it is one of `ATTENTION_KERNELS`, else a ValueError naming them."""
    if kernel not in ATTENTION_KERNELS:
        raise ValueError(f"attention_kernel={kernel!r} is not one of {ATTENTION_KERNELS}.")
    return kernel


def kernel_attention(
    query: Float[Array, "B T N H"],
    key: Float[Array, "B S N H"],
    value: Float[Array, "B S N H"],
    mask: Mask | None = None,
    *,
    is_causal: bool = False,
    implementation: str = "xla",
) -> Float[Array, "B T N H"]:
    """`dot_product_attention` (no dropout, no weights) by `jax.nn.dot_product_attention`.

    Args:
      query, key, value: `[B, T, N, H]`, `[B, S, N, H]`, `[B, S, N, H]`.
      mask: boolean, broadcastable to `[B, N, T, S]`, True where attending is allowed, or
        `Segments`.
      is_causal: also mask keys after each query (§3.2.3) without building a `[T, T]` mask
        (the form flash kernels take); self-attention only (T = S).
      implementation: "xla", "cudnn" or "splash".

    Returns:
      `[B, T, N, H]`, equal to the reference to float rounding; a query with no key it may
      attend to gets 0, as in the reference (the kernels would average over masked keys).
    """
    if is_causal and query.shape[1] != key.shape[1]:
        raise ValueError(
            f"is_causal needs as many queries as keys (self-attention), got {query.shape[1]} "
            f"queries and {key.shape[1]} keys."
        )
    if implementation == "splash":
        out = _splash_or_xla(query, key, value, mask, is_causal)
    elif implementation == "cudnn":
        out = _cudnn_or_xla(query, key, value, as_dense(mask), is_causal)
    else:
        mask = as_dense(mask)
        out = jax.nn.dot_product_attention(
            query, key, value, mask=mask, is_causal=is_causal, implementation=implementation
        )
    if mask is None:
        return out
    mask = as_dense(mask)
    if is_causal:  # Query t sees keys 0..t: one of those must be allowed, not any in the row.
        mask = jnp.logical_and(mask, causal_mask(query.shape[1]))
    any_key = jnp.any(mask, axis=-1)  # [#B, #N, #T]
    return jnp.where(any_key.swapaxes(1, 2)[..., None], out, jnp.zeros((), out.dtype))


def _splash_or_xla(query, key, value, mask, is_causal):
    """Splash attention, or XLA's where splash cannot take these inputs (logged once per
    shape with the reason: a mask that is neither keys nor segments, rows or heads that do
    not split over the mesh)."""
    try:
        q_ids, kv_ids = splash_segments(mask, query.shape[0])
        return splash.splash_attention(
            query, key, value, q_segments=q_ids, kv_segments=kv_ids, is_causal=is_causal
        )
    except splash.SplashUnsupported as e:
        _log_fallback("splash", query.shape, key.shape, str(query.dtype), str(e))
        return jax.nn.dot_product_attention(
            query, key, value, mask=as_dense(mask), is_causal=is_causal, implementation="xla"
        )


def splash_segments(mask: Mask | None, batch: int) -> tuple[Array | None, Array | None]:
    """(query ids, key ids) that say what `mask` says, for `splash.splash_attention`.

    Raises:
      splash.SplashUnsupported: a dense mask that varies per query (not keys, not segments).
    """
    if mask is None:
        return None, None
    if isinstance(mask, Segments):
        return mask.q, jnp.where(mask.kv != 0, mask.kv, splash.MASKED_KEY)
    if is_key_mask(mask):
        keys = jnp.broadcast_to(mask[:, 0, 0, :], (batch, mask.shape[-1]))
        return None, jnp.where(keys, 1, splash.MASKED_KEY)
    raise splash.SplashUnsupported(
        f"a mask of shape {tuple(mask.shape)} that is neither keys nor segments"
    )


def _cudnn_or_xla(query, key, value, mask, is_causal):
    """cuDNN's fused attention, or XLA's where cuDNN cannot take these inputs (logged once
    per traced shape with cuDNN's reason: e.g. a head dim that is not a multiple of 8,
    float32, or cuDNN not installed).

    cuDNN takes a mask only as a bias of the full `[#B, #N, T, S]` shape: the `[B, 1, 1, S]`
    padding masks of the models are broadcast over the queries first (what cuDNN reads
    anyway). `is_causal` stays a flag: cuDNN then skips the masked blocks. cuDNN's backward
    pass takes only even lengths: an odd T or S (a ViT's patches + [CLS]) gets one more
    query / key, masked out, and the extra query's output is dropped.
    """
    t, s = query.shape[1], key.shape[1]
    if mask is not None:
        mask = jnp.broadcast_to(mask, (*mask.shape[:2], t, s))
    if t % 2 or s % 2:
        query, key, value, mask = _even_lengths(query, key, value, mask)
    try:
        out = jax.nn.dot_product_attention(
            query, key, value, mask=mask, is_causal=is_causal, implementation="cudnn"
        )
    except (ValueError, NotImplementedError, RuntimeError) as e:
        _log_fallback("cuDNN", query.shape, key.shape, str(query.dtype), str(e))
        out = jax.nn.dot_product_attention(
            query, key, value, mask=mask, is_causal=is_causal, implementation="xla"
        )
    return out[:, :t]


def _even_lengths(query, key, value, mask):
    """Queries and keys/values padded to even lengths, the added keys masked out."""
    t, s = query.shape[1], key.shape[1]
    dt, ds = t % 2, s % 2

    def pad(x, extra):
        return jnp.pad(x, ((0, 0), (0, extra), (0, 0), (0, 0)))

    if mask is None:
        mask = jnp.ones((1, 1, t, s), bool)
    mask = jnp.pad(mask, ((0, 0), (0, 0), (0, dt), (0, ds)))  # added keys: False
    return pad(query, dt), pad(key, ds), pad(value, ds), mask


@functools.lru_cache(maxsize=64)
def _log_fallback(kernel: str, query_shape, key_shape, dtype: str, reason: str) -> None:
    """Logs a fallback from a fused kernel once per shape and reason, not once per layer."""
    logging.warning(
        "attention: %s cannot run query %s, key %s %s (%s); using XLA's attention.",
        kernel,
        query_shape,
        key_shape,
        dtype,
        reason,
    )
