"""Model-free decoding loops: sampling/greedy and beam search (§6.1), as pure JAX functions.

Both loops drive a `step_fn(tokens, state) -> (log_probs, state)` that scores the next token of
every row given the previous one; they know nothing of the model, so they can be tested with a
hand-written step function. Each runs in one `lax.while_loop` over fixed-size buffers and stops
early when nothing more can change.

Letters: B batch, K beam, R rows fed to `step_fn` (B for sampling, B*K for beam search, row
b * K + k holding beam k of item b), L output length, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

StepFn = Callable[[Int[Array, " R"], Any], tuple[Float[Array, "R V"], Any]]
PickFn = Callable[[Float[Array, "B V"], jax.Array], Int[Array, " B"]]
GrowFn = Callable[[Any, int], Any]

NEG_INF = -jnp.inf
TOP_P_SLACK = 1e-6  # A nucleus whose summed probability is within this of p has reached p.


class Decoded(NamedTuple):
    """Output of a decoding loop.

    tokens: `[B, L]` (sampling) or `[B, K, L]` (beam search, best first); a finished sequence
      ends with eos and is followed by pad.
    scores: `[B]` summed log-probabilities, or `[B, K]` length-normalised beam scores; `-inf`
      marks a beam slot left empty (fewer than K hypotheses with non-zero probability).
    steps: decode steps taken (at most L; fewer when every row finished early).
    """

    tokens: Array
    scores: Array
    steps: Int[Array, ""]


def length_penalty(length: Array | int, alpha: float | Array) -> Float[Array, "*shape"]:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^alpha (Wu et al. 2016, used in §6.1)."""
    return ((5.0 + jnp.asarray(length, jnp.float32)) / 6.0) ** alpha


def gather_rows(state: Any, rows: Int[Array, " R"]) -> Any:
    """Reorders every leaf of `state` that has a leading row axis; scalars are shared, kept."""
    return jax.tree.map(lambda x: x[rows] if jnp.ndim(x) else x, state)


def staged_while_loop(
    cond: Callable[[dict], Array],
    body: Callable[[dict], dict],
    carry: dict,
    stages: Sequence[int],
    grow_fn: GrowFn | None,
    *,
    steps_per_iteration: int = 1,
) -> dict:
    """`lax.while_loop(cond, body, carry)` over steps `carry["t"]`, run in stages that end at
    the steps in `stages` (increasing, the last = the loop's length).

    Before stage i, `grow_fn(carry["state"], stages[i])` may resize the step function's state:
    a KV cache then holds `stages[i]` positions during stage i instead of the whole length
    from the first step, so early steps attend over (and beam search copies) less of it. Each
    stage is its own compiled loop body; a stage after the loop has finished runs no step.

    `steps_per_iteration=2` runs two steps per loop iteration (and an odd stage's last step on
    its own). A state that every step rewrites whole (beam search's reordered KV caches) is
    copied half as often: with one step per iteration XLA computes it into a temporary and
    copies that back into the loop's buffer at every step; with two, the second step writes
    straight into the loop's buffer (more steps per iteration gain little more, for a longer
    compile; figures in docs/performance.md). When `cond` turns false after the first of the
    two, the second's results are dropped (all but the state, which a finished loop no longer
    reads), so the outcome and the step count are those of one step per iteration.
    """
    if list(stages) != sorted(set(stages)) or not stages:
        raise ValueError(f"stages must be increasing step counts, got {list(stages)}.")
    if steps_per_iteration not in (1, 2):
        raise ValueError(f"steps_per_iteration must be 1 or 2, got {steps_per_iteration!r}.")

    def pair(c: dict) -> dict:
        first = body(c)
        second = body(first)
        go = cond(first)
        kept = {k: v for k, v in first.items() if k != "state"}
        done = {k: v for k, v in second.items() if k != "state"}
        merged = jax.tree.map(lambda a, b: jnp.where(go, a, b), done, kept)
        return {**merged, "state": second["state"]}

    start = 0
    for end in stages:
        if grow_fn is not None:
            carry = {**carry, "state": grow_fn(carry["state"], end)}
        in_stage = lambda c, end=end: cond(c) & (c["t"] < end)  # noqa: E731
        if steps_per_iteration == 2:
            two_fit = lambda c, end=end: cond(c) & (c["t"] + 1 < end)  # noqa: E731
            carry = jax.lax.while_loop(two_fit, pair, carry)
            if (end - start) % 2:
                carry = jax.lax.while_loop(in_stage, body, carry)
        else:
            carry = jax.lax.while_loop(in_stage, body, carry)
        start = end
    return carry


# ------------------------------------------------------------------------- sampling / greedy
def greedy_pick(log_probs: Float[Array, "B V"], key: jax.Array) -> Int[Array, " B"]:
    """The most probable token (the key is unused)."""
    del key
    return jnp.argmax(log_probs, axis=-1).astype(jnp.int32)


def top_k_filter(logits: Float[Array, "B V"], k: Int[Array, ""] | int) -> Float[Array, "B V"]:
    """Logits outside the `k` largest of each row set to -inf (k <= 0 keeps all)."""
    descending = -jnp.sort(-logits, axis=-1)
    kth_best = jnp.take(descending, jnp.maximum(k, 1) - 1, axis=-1)[:, None]
    return jnp.where((k > 0) & (logits < kth_best), NEG_INF, logits)


def top_p_filter(logits: Float[Array, "B V"], p: Float[Array, ""] | float) -> Float[Array, "B V"]:
    """Nucleus filter (Holtzman et al. 2019, §3.1): keeps the smallest set of most probable
    tokens whose probability reaches `p`, logits of the rest set to -inf (p >= 1 keeps all).

    Tokens are ranked by probability, ties by lower id (so equal inputs always keep the same
    set), and a token is kept while the mass ranked strictly above it is below `p`: the best
    token always stays. "Reaches" allows float32 rounding of the running sum (`TOP_P_SLACK`).
    """
    probs = jax.nn.softmax(logits.astype(jnp.float32), axis=-1)
    order = jnp.argsort(-probs, axis=-1, stable=True)  # [B, V] ids, best first
    ranked = jnp.take_along_axis(probs, order, axis=-1)
    above = jnp.cumsum(ranked, axis=-1) - ranked  # mass ranked strictly above each rank
    keep_ranked = (above < p - TOP_P_SLACK) | (jnp.arange(probs.shape[-1]) == 0)
    rows = jnp.arange(probs.shape[0])[:, None]
    keep = jnp.zeros_like(keep_ranked).at[rows, order].set(keep_ranked)  # back to id order
    return jnp.where((p < 1.0) & ~keep, NEG_INF, logits)


def sampling_pick(
    temperature: Float[Array, ""] | float,
    top_k: Int[Array, ""] | int = 0,
    top_p: Float[Array, ""] | float = 1.0,
) -> PickFn:
    """Draws from softmax(log_probs / temperature), restricted to the `top_k` best when > 0 and
    then to the nucleus of probability `top_p` when < 1.

    All arguments may be traced values, so changing them does not recompile.
    """

    def pick(log_probs: Float[Array, "B V"], key: jax.Array) -> Int[Array, " B"]:
        logits = top_p_filter(top_k_filter(log_probs / temperature, top_k), top_p)
        return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)

    return pick


def sample_loop(
    step_fn: StepFn,
    state: Any,
    *,
    batch_size: int,
    max_len: int,
    pick_fn: PickFn = greedy_pick,
    rng: jax.Array | None = None,
    bos_id: int | Int[Array, " B"],
    eos_id: int | None,
    pad_id: int,
    finished: Bool[Array, " B"] | None = None,
    stages: Sequence[int] | None = None,
    grow_fn: GrowFn | None = None,
) -> Decoded:
    """One token per row per step, chosen by `pick_fn`, until every row has emitted eos.

    Args:
      step_fn: `(tokens [B], state) -> (log_probs [B, V], state)`.
      state: the initial state for `step_fn`; the first tokens fed are `bos_id`.
      batch_size: B.
      max_len: L, the most tokens generated per row (eos included).
      pick_fn: `(log_probs [B, V], key) -> tokens [B]`; `greedy_pick` by default.
      rng: key for `pick_fn`, folded with the step number; needed only by random picks.
      bos_id, eos_id, pad_id: special tokens; `eos_id=None` never stops (fixed-length runs).
        `bos_id` may be one token per row (a language model continues each prompt's last).
      finished: rows done from the start (filler rows of a batch): they emit only pad and do
        not keep the loop running. None: no row.
      stages, grow_fn: see `staged_while_loop`; by default one stage of `max_len` steps.

    Returns:
      `Decoded(tokens [B, L], scores [B], steps)`: scores sum the log-probs of the tokens chosen
      (eos included) as `step_fn` gave them.
    """
    rng = jax.random.key(0) if rng is None else rng
    init = dict(
        t=jnp.zeros((), jnp.int32),
        tokens=jnp.full((batch_size, max_len), pad_id, jnp.int32),
        scores=jnp.zeros((batch_size,), jnp.float32),
        finished=jnp.zeros((batch_size,), bool) if finished is None else finished,
        last=jnp.broadcast_to(jnp.asarray(bos_id, jnp.int32), (batch_size,)),
        state=state,
    )

    def cond(c):
        return (c["t"] < max_len) & ~jnp.all(c["finished"])

    def body(c):
        log_probs, state = step_fn(c["last"], c["state"])
        token = pick_fn(log_probs, jax.random.fold_in(rng, c["t"]))
        token_logp = jnp.take_along_axis(log_probs, token[:, None], axis=-1)[:, 0]
        token = jnp.where(c["finished"], pad_id, token)
        finished = c["finished"] | (token == eos_id) if eos_id is not None else c["finished"]
        return dict(
            t=c["t"] + 1,
            tokens=c["tokens"].at[:, c["t"]].set(token),
            scores=c["scores"] + jnp.where(c["finished"], 0.0, token_logp),
            finished=finished,
            last=token,
            state=state,
        )

    out = staged_while_loop(cond, body, init, stages or (max_len,), grow_fn)
    return Decoded(out["tokens"], out["scores"], out["t"])


# ------------------------------------------------------------------------------- beam search
TOP_K_BLOCK = 64  # `top_k`: elements per block.


def top_k(x: Float[Array, "B N"], k: int) -> tuple[Float[Array, "B k"], Int[Array, "B k"]]:
    """`jax.lax.top_k(x, k)`, the same values and indices (ties to the lower index), computed
    through blocks: the k best elements lie in the k blocks of `TOP_K_BLOCK` elements with the
    best maxima (a block holding one of them has a maximum at least as good, and only k - 1
    elements beat it), so only those k blocks are ranked element by element.

    Beam search ranks K * V candidates per input at every step, where XLA's CPU top-k over all
    of them is slow and the blocks are several times faster (docs/performance.md). Falls back to
    `jax.lax.top_k` where `N` is too short for blocks to help.
    """
    b, n = x.shape
    block = TOP_K_BLOCK
    if n < 8 * k * block:
        values, index = jax.lax.top_k(x, k)
        return values, index
    pad = -n % block  # -inf after the end: ranked after every element of x, even -inf ones.
    blocks = jnp.pad(x, ((0, 0), (0, pad)), constant_values=-jnp.inf).reshape(b, -1, block)
    _, best = jax.lax.top_k(blocks.max(axis=-1), k)
    best = jnp.sort(best, axis=-1)  # in index order, so that ties still go to the lower index
    candidates = jnp.take_along_axis(blocks, best[:, :, None], axis=1).reshape(b, k * block)
    values, j = jax.lax.top_k(candidates, k)
    return values, jnp.take_along_axis(best, j // block, axis=1) * block + j % block


def _take_beams(x: Array, beams: Int[Array, "B M"]) -> Array:
    """x `[B, K, ...]` -> `[B, M, ...]`, picking beams per batch item."""
    index = beams.reshape(beams.shape + (1,) * (x.ndim - 2))
    return jnp.take_along_axis(x, index, axis=1)


def _top(scores: Float[Array, "B M"], k: int, *arrays: Array) -> tuple[Array, ...]:
    """The k best of M entries per batch item (best first), and the matching rows of `arrays`."""
    best, index = jax.lax.top_k(scores, k)
    return (best, *(_take_beams(a, index) for a in arrays))


def beam_search_loop(
    step_fn: StepFn,
    state: Any,
    *,
    batch_size: int,
    beam_size: int,
    max_len: int,
    alpha: float | Float[Array, ""],
    bos_id: int,
    eos_id: int | None,
    pad_id: int,
    reorder_fn: Callable[[Any, Int[Array, " R"]], Any] = gather_rows,
    early_stopping: bool = True,
    stages: Sequence[int] | None = None,
    grow_fn: GrowFn | None = None,
) -> Decoded:
    """Beam search with the GNMT length penalty, as used in §6.1 of the paper.

    Each step expands the K live beams of every item by every token and ranks the K*V
    candidates by log-prob. Candidates ending in eos that rank within the best K are *finished*:
    kept, with score logprob / lp(|Y|) (|Y| counts the eos), in a separate best-K list. The K
    best candidates not ending in eos become the new live beams, and `reorder_fn` gathers the
    `step_fn` state rows of their parent beams.

    The search stops once no live beam can enter the finished list. A live beam has log-prob
    l <= 0 now and can only lose probability, ending at some length n <= L; so its final score
    is at most l / max(lp(n)) over the lengths n still reachable (= l / lp(L) when alpha >= 0).
    When that bound is below the worst of K finished scores for every item, more steps cannot
    change the result (compared with running to L).

    Args:
      step_fn: `(tokens [B*K], state) -> (log_probs [B*K, V], state)`, rows batch-major; the
        log-probs must be normalised (<= 0), which the early-stopping bound relies on.
      state: initial state with B*K rows (each item's row repeated K times).
      batch_size, beam_size: B and K.
      max_len: L, the most tokens per hypothesis (eos included).
      alpha: length-penalty exponent; 0 ranks by plain log-prob.
      bos_id, eos_id, pad_id: special tokens; `eos_id=None` runs all L steps.
      reorder_fn: `(state, parent_rows [B*K]) -> state`; by default every leaf with a leading
        row axis is gathered.
      early_stopping: stop as soon as the result is decided (False: always run L steps).
      stages, grow_fn: see `staged_while_loop`; by default one stage of `max_len` steps.

    Returns:
      `Decoded(tokens [B, K, L], scores [B, K], steps)`, best first. Finished hypotheses come
      first; only an item with fewer than K of them gets live beams cut at the length limit to
      fill its remaining slots (scored logprob / lp(their length)).
    """
    b, k, length = batch_size, beam_size, max_len
    beam_offsets = (jnp.arange(b) * k)[:, None]  # [B, 1]: first row of each item

    init = dict(
        t=jnp.zeros((), jnp.int32),
        # All K beams start as the same empty prefix: keep only one alive at first.
        alive_logp=jnp.tile(jnp.array([0.0] + [NEG_INF] * (k - 1), jnp.float32), (b, 1)),
        alive_seq=jnp.full((b, k, length), pad_id, jnp.int32),
        last=jnp.full((b, k), bos_id, jnp.int32),
        finished_score=jnp.full((b, k), NEG_INF, jnp.float32),
        finished_seq=jnp.full((b, k, length), pad_id, jnp.int32),
        state=state,
    )

    def best_possible(c) -> Float[Array, " B"]:
        reachable = jnp.maximum(length_penalty(c["t"] + 1, alpha), length_penalty(length, alpha))
        return c["alive_logp"][:, 0] / reachable

    def cond(c):
        running = c["t"] < length
        if early_stopping:
            decided = jnp.all(c["finished_score"][:, -1] > best_possible(c))
            running &= ~decided
        return running

    def body(c):
        t = c["t"]
        log_probs, state = step_fn(c["last"].reshape(b * k), c["state"])
        vocab = log_probs.shape[-1]
        cand_logp = c["alive_logp"][:, :, None] + log_probs.reshape(b, k, vocab)
        # 2K candidates always hold K that do not end in eos (each beam has one eos candidate).
        top_logp, top_index = top_k(cand_logp.reshape(b, k * vocab), 2 * k)
        parent, token = top_index // vocab, (top_index % vocab).astype(jnp.int32)  # [B, 2K]
        cand_seq = _take_beams(c["alive_seq"], parent).at[:, :, t].set(token)  # [B, 2K, L]
        is_eos = token == eos_id if eos_id is not None else jnp.zeros_like(token, bool)

        # Finished: eos candidates among the best K, merged into the finished list.
        new_finished = jnp.where(
            is_eos[:, :k], top_logp[:, :k] / length_penalty(t + 1, alpha), NEG_INF
        )
        finished_score, finished_seq = _top(
            jnp.concatenate([c["finished_score"], new_finished], axis=1),
            k,
            jnp.concatenate([c["finished_seq"], cand_seq[:, :k]], axis=1),
        )

        # Alive: the K best candidates that continue; their state rows follow their parents.
        alive_logp, alive_seq, alive_token, alive_parent = _top(
            jnp.where(is_eos, NEG_INF, top_logp), k, cand_seq, token, parent
        )
        rows = (beam_offsets + alive_parent).reshape(b * k)
        return dict(
            t=t + 1,
            alive_logp=alive_logp,
            alive_seq=alive_seq,
            last=alive_token,
            finished_score=finished_score,
            finished_seq=finished_seq,
            state=reorder_fn(state, rows),
        )

    c = staged_while_loop(cond, body, init, stages or (max_len,), grow_fn, steps_per_iteration=2)

    # Fill empty finished slots with live beams cut at the length limit: finished first by
    # score, then live beams by score, then the empty slots.
    alive_score = c["alive_logp"] / length_penalty(c["t"], alpha)
    scores = jnp.concatenate([c["finished_score"], alive_score], axis=1)  # [B, 2K]
    group = jnp.concatenate(
        [jnp.zeros((b, k), jnp.int32), jnp.ones((b, k), jnp.int32)], axis=1
    ) + 2 * (scores == NEG_INF)
    order = jnp.lexsort((-scores, group), axis=-1)[:, :k]
    scores = jnp.take_along_axis(scores, order, axis=1)
    seqs = _take_beams(jnp.concatenate([c["finished_seq"], c["alive_seq"]], axis=1), order)
    seqs = jnp.where((scores == NEG_INF)[:, :, None], pad_id, seqs)
    return Decoded(seqs, scores, c["t"])
