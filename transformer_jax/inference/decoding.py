"""Decoding with the encoder-decoder: greedy, beam search (§6.1) and sampling, jit-compiled.

The encoder runs once per batch; every decoder step is one `EncoderDecoder.decode_step` on the KV
cache, inside the `lax.while_loop` of `transformer_jax.search`. Beam search repeats the
self-attention caches to B*K rows once and then `reorder_cache` gathers the keys/values of each
new beam's parent every step; the encoder-decoder keys/values (and the source mask) stay one
row per input, read by all K beams of it. The cache's layout is the attention module's business.
`use_cache=False` re-runs the whole teacher-forced decoder on a fixed-size prefix each step
instead: the reference that tests and benchmarks compare the cache against.

Calls with the same shapes and options reuse one compiled program. The model goes into `jax.jit`
as the pytree an NNX module is: flattening it is far cheaper than an `nnx.split` at every call,
whose cost showed in the time to decode one sentence (figures: docs/performance.md).
(A weight shared by two modules, such as tied embeddings, is then two leaves of one buffer.)

Letters: B batch, K beam, R rows fed to the decoder (B or B*K), S source length, L output
length, V vocabulary, D model dim.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from transformer_jax.inference.search import (
    NEG_INF,
    Decoded,
    beam_search_loop,
    gather_rows,
    greedy_pick,
    sample_loop,
    sampling_pick,
)
from transformer_jax.models.encoder_decoder import EncoderDecoder
from transformer_jax.nn import grow_cache, reorder_cache, repeat_cache, unstacked
from transformer_jax.tokens import BOS_ID, EOS_ID

EXTRA_OUTPUT_LEN = 50  # §6.1: "maximum output length during inference to input length + 50".
FIRST_STAGE = 32  # Cached decoding: the KV cache holds 32 positions, then 64, 128... (below).


# ------------------------------------------------------------------------------ validation
def output_length(model: EncoderDecoder, src_len: int, max_len: int | None) -> int:
    """L: `max_len`, or by default source length + 50 (§6.1) capped at `cfg.max_len`.

    Raises `ValueError` for a length the model cannot decode (learned positions stop at
    `cfg.max_len`).
    """
    cfg = model.cfg
    if max_len is None:
        return max(1, min(src_len + EXTRA_OUTPUT_LEN, cfg.max_len))
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
        raise ValueError(f"max_len must be a positive integer, got {max_len!r}.")
    if cfg.positional == "learned" and max_len > cfg.max_len:
        raise ValueError(
            f"max_len={max_len} exceeds the model's learned positions "
            f"(EncoderDecoderConfig.max_len={cfg.max_len}): decode at most {cfg.max_len} tokens."
        )
    return max_len


def _check_source(model: EncoderDecoder, src) -> Int[Array, "B S"]:
    src = jnp.asarray(src)
    if src.ndim != 2 or not jnp.issubdtype(src.dtype, jnp.integer):
        raise ValueError(
            f"src must be integer token ids of shape [batch, source_len], got {src.dtype} "
            f"{src.shape}; a single sentence needs a leading batch axis: src[None]."
        )
    if model.cfg.positional == "learned" and src.shape[1] > model.cfg.max_len:
        raise ValueError(
            f"source length {src.shape[1]} exceeds the model's learned positions "
            f"(EncoderDecoderConfig.max_len={model.cfg.max_len}): truncate or re-bucket the input."
        )
    return src


def cache_stages(max_len: int) -> tuple[int, ...]:
    """Where the KV cache grows while decoding `max_len` tokens: 32, 64, 128, ... positions
    while the next size still fits twice in `max_len`, then `max_len`.

    A step attends over (and beam search copies) the cache's current size, so growing keeps
    that within about 2x of the positions filled (and within `FIRST_STAGE`), where a cache of
    `max_len` from the first step costs the whole length at every step (source + 50 by
    default, §6.1). Each stage compiles its own loop body: few stages, a few programs; below
    64 tokens there is one.
    """
    stages, size = [], FIRST_STAGE
    while 2 * size <= max_len:
        stages.append(size)
        size *= 2
    return (*stages, max_len)


# ------------------------------------------------------------------------------ step functions
def next_token_log_probs(
    logits: Float[Array, "R V"], src_mask: Bool[Array, "R S"], pad_id: int, eos_id: int | None
) -> Float[Array, "R V"]:
    """Log-probabilities for the next token.

    Padding is never generated (its probability goes to the other tokens), and a row with an
    empty source (all pad) can only produce eos, with log-prob 0: its output is empty.
    """
    logits = logits.astype(jnp.float32).at[:, pad_id].set(NEG_INF)
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    if eos_id is None:
        return log_probs
    only_eos = jnp.where(jnp.arange(logits.shape[-1]) == eos_id, 0.0, NEG_INF)
    empty = ~jnp.any(src_mask, axis=-1, keepdims=True)
    return jnp.where(empty, only_eos, log_probs)


def _repeat_rows(tree: Any, copies: int) -> Any:
    """Every leaf with a leading row axis, each row repeated `copies` times in place."""
    if copies == 1:
        return tree
    return jax.tree.map(lambda x: jnp.repeat(x, copies, axis=0) if jnp.ndim(x) else x, tree)


def _cached_decoder(model: EncoderDecoder, src, max_len: int, copies: int, eos_id: int | None):
    """Step function and initial state (the KV cache, sized for the first of
    `cache_stages(max_len)`) for decoding through `decode_step`."""
    model = unstacked(model)  # Layers sliced out of a scanned stack once, not at every step.
    src_mask = model.source_mask(src)
    cache = model.init_cache(model.encode(src), src_mask, cache_stages(max_len)[0])

    def step(tokens: Int[Array, " R"], cache: dict) -> tuple[Float[Array, "R V"], dict]:
        logits, cache = model.decode_step(tokens, cache)
        row_mask = jnp.repeat(cache["src_mask"], copies, axis=0)  # [B, S] -> [R, S]
        return next_token_log_probs(logits, row_mask, model.cfg.pad_id, eos_id), cache

    return step, repeat_cache(cache, copies)


def _uncached_decoder(model: EncoderDecoder, src, max_len: int, copies: int, eos_id: int | None):
    """Step function and state that re-run the teacher-forced decoder on the whole prefix."""
    src_mask = model.source_mask(src)
    state = dict(
        prefix=jnp.full((src.shape[0], max_len), model.cfg.pad_id, jnp.int32),
        index=jnp.zeros((), jnp.int32),
        memory=model.encode(src),
        src_mask=src_mask,
    )

    def step(tokens: Int[Array, " R"], state: dict) -> tuple[Float[Array, "R V"], dict]:
        prefix = state["prefix"].at[:, state["index"]].set(tokens)
        logits = model.decode(prefix, state["memory"], state["src_mask"])  # [R, L, V]
        logits = jax.lax.dynamic_index_in_dim(logits, state["index"], axis=1, keepdims=False)
        log_probs = next_token_log_probs(logits, state["src_mask"], model.cfg.pad_id, eos_id)
        return log_probs, {**state, "prefix": prefix, "index": state["index"] + 1}

    return step, _repeat_rows(state, copies)


def _decoder(model, src, max_len, copies, eos_id, use_cache):
    """(step function, initial state, loop stages and the state's grow function)."""
    if not use_cache:
        return (*_uncached_decoder(model, src, max_len, copies, eos_id), {})
    step, cache = _cached_decoder(model, src, max_len, copies, eos_id)
    return step, cache, dict(stages=cache_stages(max_len), grow_fn=grow_cache)


# ---------------------------------------------------------------------------- compiled loops
def _loop_args(model, src, max_len: int, bos_id: int, eos_id: int | None, stages: dict) -> dict:
    """The arguments every decoding loop takes: rows, length, special ids and the stages."""
    return dict(batch_size=src.shape[0], max_len=max_len, bos_id=bos_id, eos_id=eos_id,
                pad_id=model.cfg.pad_id, **stages)  # fmt: skip


@functools.partial(
    jax.jit,
    static_argnames=("max_len", "greedy", "use_cache", "bos_id", "eos_id"),
)
def _sample_compiled(
    model, src, rng, temperature, top_k, *, max_len, greedy, use_cache, bos_id, eos_id
) -> Decoded:
    step, state, stages = _decoder(model, src, max_len, 1, eos_id, use_cache)
    pick = greedy_pick if greedy else sampling_pick(temperature, top_k)
    loop = _loop_args(model, src, max_len, bos_id, eos_id, stages)
    return sample_loop(step, state, pick_fn=pick, rng=rng, **loop)


@functools.partial(
    jax.jit,
    static_argnames=(
        "beam_size",
        "max_len",
        "use_cache",
        "early_stopping",
        "bos_id",
        "eos_id",
    ),
)
def _beam_compiled(
    model, src, alpha, *, beam_size, max_len, use_cache, early_stopping, bos_id, eos_id
) -> Decoded:
    step, state, stages = _decoder(model, src, max_len, beam_size, eos_id, use_cache)
    return beam_search_loop(
        step,
        state,
        beam_size=beam_size,
        alpha=alpha,
        reorder_fn=reorder_cache if use_cache else gather_rows,
        early_stopping=early_stopping,
        **_loop_args(model, src, max_len, bos_id, eos_id, stages),
    )


# ------------------------------------------------------------------------------ public API
def sample(
    model: EncoderDecoder,
    src: Int[Array, "B S"],
    rng: jax.Array,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    max_len: int | None = None,
    use_cache: bool = True,
    bos_id: int = BOS_ID,
    eos_id: int | None = EOS_ID,
) -> tuple[Int[Array, "B L"], Float[Array, " B"]]:
    """Ancestral sampling from softmax(logits / temperature), optionally from the top-k tokens.

    Args:
      model: the `EncoderDecoder` (used in inference mode, no dropout).
      src: source token ids `[B, S]`, padded with `cfg.pad_id`.
      rng: PRNG key; the same key gives the same samples.
      temperature: > 0 sharpens (< 1) or flattens (> 1) the distribution; 0 is greedy.
      top_k: sample among the k most probable tokens only; 0 means all.
      max_len: L, the most output tokens; default source length + 50 (§6.1), at most
        `cfg.max_len`.
      use_cache: False re-runs the full decoder each step (slow; a reference for tests).
      bos_id, eos_id: start and end tokens; `eos_id=None` always produces L tokens.

    Returns:
      tokens `[B, L]` (eos included, then pad) and their summed log-probs `[B]` under the model
      itself (temperature 1, no top-k).
    """
    src = _check_source(model, src)
    if not temperature >= 0:
        raise ValueError(f"temperature must be >= 0 (0 is greedy), got {temperature!r}.")
    vocab = model.cfg.vocab_size
    if not isinstance(top_k, int) or not 0 <= top_k <= vocab:
        raise ValueError(f"top_k must be an integer in [0, vocab_size={vocab}], got {top_k!r}.")
    out = _sample_compiled(
        model,
        src,
        rng,
        jnp.float32(max(temperature, 1e-30)),
        jnp.int32(top_k),
        max_len=output_length(model, src.shape[1], max_len),
        greedy=temperature == 0,
        use_cache=use_cache,
        bos_id=bos_id,
        eos_id=eos_id,
    )
    return out.tokens, out.scores


def greedy_decode(
    model: EncoderDecoder,
    src: Int[Array, "B S"],
    *,
    max_len: int | None = None,
    use_cache: bool = True,
    bos_id: int = BOS_ID,
    eos_id: int | None = EOS_ID,
) -> tuple[Int[Array, "B L"], Float[Array, " B"]]:
    """The most probable token at every step, until eos or `max_len` tokens.

    Arguments as for `sample`. Returns tokens `[B, L]` (eos included, then pad) and their summed
    log-probs `[B]`.
    """
    return sample(
        model,
        src,
        jax.random.key(0),
        temperature=0.0,
        max_len=max_len,
        use_cache=use_cache,
        bos_id=bos_id,
        eos_id=eos_id,
    )


def beam_search(
    model: EncoderDecoder,
    src: Int[Array, "B S"],
    *,
    beam_size: int = 4,
    alpha: float = 0.6,
    max_len: int | None = None,
    use_cache: bool = True,
    early_stopping: bool = True,
    bos_id: int = BOS_ID,
    eos_id: int | None = EOS_ID,
) -> tuple[Int[Array, "B K L"], Float[Array, "B K"]]:
    """Beam search with length penalty lp(Y) = ((5 + |Y|) / 6)^alpha, as in §6.1 (K=4, alpha=0.6).

    Hypotheses are ranked by log P(Y | X) / lp(Y), where |Y| counts the eos. See
    `transformer_jax.search.beam_search_loop` for the algorithm and when it stops.

    Args:
      model, src, max_len, use_cache, bos_id, eos_id: as for `sample`.
      beam_size: K, hypotheses kept per input.
      alpha: length-penalty exponent; 0 ranks by plain log-prob.
      early_stopping: stop once no live beam can change the result; False always runs L steps
        (same result, slower).

    Returns:
      tokens `[B, K, L]` best first (eos included, then pad) and their scores `[B, K]`. Complete
      hypotheses (ending in eos) come first; an input with fewer than K of them gets hypotheses
      cut at `max_len` in the remaining slots, and `-inf` marks a slot left empty.
    """
    src = _check_source(model, src)
    if not isinstance(beam_size, int) or isinstance(beam_size, bool) or beam_size < 1:
        raise ValueError(f"beam_size must be a positive integer, got {beam_size!r}.")
    out = _beam_compiled(
        model,
        src,
        jnp.float32(alpha),
        beam_size=beam_size,
        max_len=output_length(model, src.shape[1], max_len),
        use_cache=use_cache,
        early_stopping=early_stopping,
        bos_id=bos_id,
        eos_id=eos_id,
    )
    return out.tokens, out.scores
