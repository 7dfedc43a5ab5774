"""The model-free decoding loops, driven by hand-written step functions with known log-probs."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.inference.search import (
    TOP_K_BLOCK,
    beam_search_loop,
    length_penalty,
    sample_loop,
    staged_while_loop,
    top_k,
)

PAD, EOS, BOS, A, B, C = 0, 1, 2, 3, 4, 5
V = 6
IDS = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)


def _table(*rows: dict[int, float]) -> jnp.ndarray:
    """Per-position next-token log-probs from {token: probability} (missing tokens: 0)."""
    probs = np.zeros((len(rows), V))
    for t, row in enumerate(rows):
        for token, p in row.items():
            probs[t, token] = p
    np.testing.assert_allclose(probs.sum(1), 1.0)
    with np.errstate(divide="ignore"):
        return jnp.asarray(np.log(probs), jnp.float32)


def _positional_step(table):
    """Log-probs depend only on the position (the last table row repeats); state is the step."""

    def step(tokens, t):
        row = table[jnp.minimum(t, table.shape[0] - 1)]
        return jnp.broadcast_to(row, (tokens.shape[0], V)), t + 1

    return step


def _beam(step, state, *, batch=1, **kw):
    out = jax.jit(
        lambda s: beam_search_loop(step, s, batch_size=batch, **{**IDS, **kw}),
    )(state)
    return jax.tree.map(np.asarray, out)


def test_length_penalty_formula():
    assert float(length_penalty(1, 0.6)) == pytest.approx(1.0)
    assert float(length_penalty(7, 0.6)) == pytest.approx(2.0**0.6)
    assert float(length_penalty(19, 0.0)) == 1.0


# A short hypothesis [eos] with log-prob ln 0.4 and a long one [a, a, a, eos] with a lower
# log-prob (ln .55 + 2 ln .85 + ln .95 = -0.974) but a better length-normalised score for
# alpha = 0.6: -0.974 / lp(4) = -0.764 > -0.916 / lp(1).
SHORT_OR_LONG = _table(
    {EOS: 0.4, A: 0.55, B: 0.05},
    {EOS: 0.01, A: 0.85, B: 0.14},
    {EOS: 0.01, A: 0.85, B: 0.14},
    {EOS: 0.95, A: 0.03, B: 0.02},
)
SHORT_LOGP = np.log(0.4)
LONG_LOGP = np.log(0.55) + 2 * np.log(0.85) + np.log(0.95)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_length_penalty_decides_between_short_and_long(alpha):
    out = _beam(_positional_step(SHORT_OR_LONG), jnp.int32(0), beam_size=2, max_len=8, alpha=alpha)
    short = [EOS] + [PAD] * 7
    long = [A, A, A, EOS] + [PAD] * 4
    lp_long = ((5 + 4) / 6) ** alpha
    short_score, long_score = SHORT_LOGP, LONG_LOGP / lp_long
    assert (short_score > long_score) == (alpha == 0.0)  # the constructed case is as claimed
    expected = [(short, short_score), (long, long_score)]
    expected.sort(key=lambda pair: -pair[1])
    np.testing.assert_array_equal(out.tokens[0], [expected[0][0], expected[1][0]])
    np.testing.assert_allclose(out.scores[0], [expected[0][1], expected[1][1]], rtol=1e-5)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_early_stopping_stops_and_changes_nothing(alpha):
    kw = dict(beam_size=2, max_len=20, alpha=alpha)
    early = _beam(_positional_step(SHORT_OR_LONG), jnp.int32(0), **kw)
    full = _beam(_positional_step(SHORT_OR_LONG), jnp.int32(0), early_stopping=False, **kw)
    assert full.steps == 20
    assert early.steps < 8  # both slots are finished by step 4; nothing live can beat them
    np.testing.assert_array_equal(early.tokens, full.tokens)
    np.testing.assert_array_equal(early.scores, full.scores)


def test_early_stopping_bound_uses_the_longest_reachable_length():
    """A live beam behind the finished one now can still overtake it once normalised.

    At step 1 the finished [eos] scores ln .5 = -0.69 and the live [a] has ln .45 = -0.80: a
    bound of logprob / lp(current length) would stop and return [eos]. But [a, a, eos] ends at
    -0.82 / lp(3) = -0.61 with alpha = 1; the bound logprob / lp(max_len) keeps searching.
    """
    table = _table(
        {EOS: 0.5, A: 0.45, B: 0.05},
        {EOS: 0.005, A: 0.99, B: 0.005},
        {EOS: 0.99, A: 0.005, B: 0.005},
    )
    out = _beam(_positional_step(table), jnp.int32(0), beam_size=1, max_len=10, alpha=1.0)
    np.testing.assert_array_equal(out.tokens[0, 0, :4], [A, A, EOS, PAD])
    expected = (np.log(0.45) + 2 * np.log(0.99)) / (8 / 6)
    np.testing.assert_allclose(out.scores[0, 0], expected, rtol=1e-5)
    assert out.steps < 10


# A step function whose log-probs depend on the whole prefix through a per-row hash kept in the
# state: any mistake in reordering the state by parent beam changes the scores.
HASHES = 11
HASH_TABLE = np.asarray(
    jax.nn.log_softmax(
        jnp.asarray(np.random.default_rng(0).normal(size=(HASHES, V)) * 1.5)
        .at[:, PAD]
        .set(-jnp.inf)
        .at[:, BOS]
        .set(-jnp.inf)
    )
)


def _next_hash(h, token):
    return (h * 7 + token + 1) % HASHES


def _hash_step(tokens, h):
    h = _next_hash(h, tokens)
    return jnp.asarray(HASH_TABLE)[h], h


def _enumerate(first_hash: int, length: int, alpha: float):
    """Every hypothesis of at most `length` tokens: (finished, truncated) as (score, tokens)."""
    finished, truncated = [], []
    for n in range(1, length + 1):
        for body in itertools.product([A, B, C], repeat=n - 1):
            for last in [EOS, A, B, C]:
                if last != EOS and n < length:
                    continue
                tokens, h, logp = (*body, last), first_hash, 0.0
                for prev, tok in zip((BOS, *tokens[:-1]), tokens, strict=True):
                    h = _next_hash(h, prev)
                    logp += HASH_TABLE[h, tok]
                score = logp / ((5 + n) / 6) ** alpha
                (finished if last == EOS else truncated).append((score, tokens))
    return sorted(finished, reverse=True), sorted(truncated, reverse=True)


def test_beam_as_wide_as_the_tree_is_exhaustive():
    """With K >= every candidate at every step nothing is pruned: the K best are exact."""
    length, alpha, k = 3, 0.6, 36  # 3 content tokens + eos: at most 9 * 4 = 36 candidates
    first = np.array([0, 5])  # two batch items with different prefix hashes
    out = _beam(
        _hash_step,
        jnp.asarray(np.repeat(first, k), jnp.int32),
        batch=2,
        beam_size=k,
        max_len=length,
        alpha=alpha,
    )
    for i, h0 in enumerate(first):
        finished, truncated = _enumerate(int(h0), length, alpha)
        expected = (finished + truncated)[:k]  # finished first, then cut-off hypotheses
        np.testing.assert_allclose(out.scores[i], [s for s, _ in expected], rtol=1e-5)
        for row, (_, tokens) in zip(out.tokens[i], expected, strict=True):
            padded = list(tokens) + [PAD] * (length - len(tokens))
            np.testing.assert_array_equal(row, padded)


def test_beam_of_one_is_greedy():
    state = jnp.asarray([0, 3, 8], jnp.int32)
    kw = dict(max_len=9, **IDS)
    greedy = jax.jit(lambda s: sample_loop(_hash_step, s, batch_size=3, **kw))(state)
    beam = _beam(_hash_step, state, batch=3, beam_size=1, max_len=9, alpha=0.0)
    np.testing.assert_array_equal(beam.tokens[:, 0], greedy.tokens)
    np.testing.assert_allclose(beam.scores[:, 0], greedy.scores, rtol=1e-5)


def test_sample_loop_pads_after_eos_and_stops_when_all_finished():
    table = _table({A: 0.9, EOS: 0.1}, {B: 0.8, EOS: 0.2}, {EOS: 0.7, C: 0.3})
    out = jax.jit(
        lambda t: sample_loop(_positional_step(table), t, batch_size=2, max_len=12, **IDS)
    )(jnp.int32(0))
    np.testing.assert_array_equal(out.tokens, [[A, B, EOS] + [PAD] * 9] * 2)
    np.testing.assert_allclose(out.scores, np.log(0.9 * 0.8 * 0.7), rtol=1e-5)
    assert int(out.steps) == 3


def test_staged_loop_grows_the_state_and_equals_one_stage():
    """A step function whose state is a buffer of the positions seen: run in stages (3, 5, 8)
    the buffer is resized before each stage, and the result equals one 8-step stage."""
    seen_sizes = []

    def step(tokens, buffer):
        seen_sizes.append(buffer.shape[1])  # Traced once per stage.
        total = jnp.where(buffer >= 0, buffer, 0).sum(1, keepdims=True)  # Size-independent.
        log_probs = jax.nn.log_softmax(jnp.sin(jnp.arange(6.0) * (total + 1)))
        return log_probs, buffer.at[:, jnp.argmin(buffer[0] >= 0)].set(tokens)

    def grow(buffer, size):
        return jnp.pad(buffer, ((0, 0), (0, size - buffer.shape[1])), constant_values=-1)

    kw = dict(batch_size=2, max_len=8, bos_id=1, eos_id=None, pad_id=0)
    start = jnp.full((2, 3), -1)
    staged = sample_loop(step, start, stages=(3, 5, 8), grow_fn=grow, **kw)
    assert seen_sizes == [3, 5, 8]
    single = sample_loop(step, jnp.full((2, 8), -1), **kw)
    np.testing.assert_array_equal(staged.tokens, single.tokens)
    np.testing.assert_allclose(staged.scores, single.scores)
    assert int(staged.steps) == 8
    with pytest.raises(ValueError, match="stages must be increasing"):
        sample_loop(step, start, stages=(5, 3, 8), grow_fn=grow, **kw)


@pytest.mark.parametrize("n", [8 * 8 * TOP_K_BLOCK, 8 * 8 * TOP_K_BLOCK + 37, 100])
def test_top_k_by_blocks_equals_lax_top_k_with_ties_and_minus_inf(n):
    """Same values and indices as jax.lax.top_k, ties to the lower index: rows of distinct
    values, rows of few distinct values (ties across and within blocks), -inf-heavy rows (dead
    beams) and an all -inf row; `n` a multiple of the block, not one, and too short for blocks."""
    rng = np.random.default_rng(0)
    rows = [
        rng.standard_normal(n),
        rng.integers(0, 3, n).astype(np.float64),
        np.where(rng.random(n) < 0.999, -np.inf, rng.standard_normal(n)),
        np.full(n, -np.inf),
    ]
    x = jnp.asarray(np.stack(rows), jnp.float32)
    values, index = jax.jit(lambda x: top_k(x, 8))(x)
    want_values, want_index = jax.lax.top_k(x, 8)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(index, want_index)


@pytest.mark.parametrize("stop_at", [3, 4, 7, 99])
def test_two_steps_per_iteration_stop_where_one_step_does(stop_at):
    """Stages of odd and even lengths, a stop after an odd or even step, or none: two steps per
    loop iteration give the carry of one (the step count included), each step running in its
    own stage (seeing that stage's state size); the state may have run one step further."""
    stages = (3, 4, 9, 13)

    def body(c):
        t, size = c["t"], c["state"].shape[0]
        return {"t": t + 1, "sizes": c["sizes"].at[t].set(size), "state": c["state"] + 1}

    def cond(c):
        return c["t"] < stop_at

    def grow(state, size):
        return jnp.pad(state, (0, size - state.shape[0]), mode="edge")

    init = {"t": jnp.int32(0), "sizes": jnp.zeros(13, jnp.int32), "state": jnp.zeros(1, int)}
    run = jax.jit(
        lambda c, n: staged_while_loop(cond, body, c, stages, grow, steps_per_iteration=n),
        static_argnums=1,
    )
    one, two = run(init, 1), run(init, 2)
    steps = min(stop_at, 13)
    expected = [next(end for end in stages if t < end) for t in range(steps)]
    np.testing.assert_array_equal(one["sizes"][:steps], expected)
    np.testing.assert_array_equal(two["sizes"], one["sizes"])
    assert int(two["t"]) == int(one["t"]) == steps
    assert int(two["state"][0]) - int(one["state"][0]) in (0, 1)
