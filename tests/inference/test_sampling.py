"""Sampling filters (top-k, nucleus) and the per-row start of `sample_loop`, on hand-made
distributions and step functions: no model involved."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.inference.search import (
    sample_loop,
    sampling_pick,
    top_k_filter,
    top_p_filter,
)

# The distribution 0.5, 0.2, 0.15, 0.1, 0.05 scattered over ids so that sorting matters.
IDS_BY_RANK = [3, 0, 4, 1, 2]
PROBS = np.zeros(5, np.float32)
PROBS[IDS_BY_RANK] = [0.5, 0.2, 0.15, 0.1, 0.05]


def kept(logits: jax.Array) -> list[set[int]]:
    """The ids left finite in each row."""
    return [set(np.flatnonzero(np.isfinite(row)).tolist()) for row in np.asarray(logits)]


def log(probs) -> jax.Array:
    return jnp.log(jnp.asarray(probs, jnp.float32)).reshape(-1, len(probs[0]))


@pytest.mark.parametrize(
    ("p", "count"),
    [(1e-9, 1), (0.3, 1), (0.5, 1), (0.7, 2), (0.71, 3), (0.85, 3), (0.86, 4), (0.99, 5), (1.0, 5)],
)
def test_top_p_keeps_the_smallest_set_whose_probability_reaches_p(p, count):
    (got,) = kept(top_p_filter(log([PROBS]), p))
    assert got == set(IDS_BY_RANK[:count])


def test_top_p_rows_are_independent_and_ties_go_to_the_lower_id():
    logits = log([[0.2, 0.3, 0.3, 0.2], [0.1, 0.1, 0.1, 0.7]])
    assert kept(top_p_filter(logits, 0.3)) == [{1}, {3}]  # one of two tied tokens: the lower id
    assert kept(top_p_filter(logits, 0.6)) == [{1, 2}, {3}]
    assert kept(top_p_filter(logits, 0.75)) == [{0, 1, 2}, {0, 3}]
    # p traced under jit: the same sets, and the kept logits unchanged.
    traced = jax.jit(top_p_filter)(logits, jnp.float32(0.75))
    assert kept(traced) == [{0, 1, 2}, {0, 3}]
    np.testing.assert_array_equal(np.asarray(traced)[0, :3], np.asarray(logits)[0, :3])


def test_top_k_filter_keeps_the_k_best_and_zero_keeps_all():
    logits = log([PROBS])
    assert kept(top_k_filter(logits, 2)) == [set(IDS_BY_RANK[:2])]
    assert kept(top_k_filter(logits, 0)) == [set(range(5))]
    assert kept(jax.jit(top_k_filter)(logits, jnp.int32(4))) == [set(IDS_BY_RANK[:4])]


def draws(pick, logits, n=20000):
    """`n` picks of row 0 with the keys sample_loop would use at steps 0 .. n-1."""
    keys = jax.vmap(lambda t: jax.random.fold_in(jax.random.key(0), t))(jnp.arange(n))
    return np.asarray(jax.jit(jax.vmap(pick, in_axes=(None, 0)))(logits, keys))[:, 0]


def test_nucleus_sampling_draws_kept_tokens_at_their_renormalised_rates():
    got = draws(sampling_pick(1.0, 0, 0.71), log([PROBS]))
    freq = np.bincount(got, minlength=5) / len(got)
    nucleus = IDS_BY_RANK[:3]
    assert set(np.unique(got).tolist()) == set(nucleus)
    np.testing.assert_allclose(freq[nucleus], PROBS[nucleus] / PROBS[nucleus].sum(), atol=0.015)


def test_temperature_then_top_k_then_top_p():
    # Temperature first: at T=0.25 the best token holds 0.86 > 0.8, so the nucleus is it alone
    # (at T=1 it would also hold the second best).
    assert set(draws(sampling_pick(0.25, 0, 0.8), log([[0.5, 0.3, 0.2]]), 2000)) == {0}
    assert set(draws(sampling_pick(1.0, 0, 0.8), log([[0.5, 0.3, 0.2]]), 2000)) == {0, 1}
    # Top-k before top-p: the two best renormalise to 0.53, 0.47, and p=0.5 keeps the first
    # (top-p first would keep both).
    assert set(draws(sampling_pick(1.0, 2, 0.5), log([[0.4, 0.35, 0.25]]), 2000)) == {0}
    assert set(draws(sampling_pick(1.0, 0, 0.5), log([[0.4, 0.35, 0.25]]), 2000)) == {0, 1}


def counting_step(vocab: int):
    """A step function whose best next token is (last + 1) mod vocab; it counts its calls."""

    def step(tokens, calls):
        return jax.nn.log_softmax(5.0 * jax.nn.one_hot((tokens + 1) % vocab, vocab)), calls + 1

    return step


def test_sample_loop_starts_each_row_from_its_own_token_and_skips_finished_rows():
    eos = 1
    kwargs = dict(batch_size=3, max_len=10, eos_id=eos, pad_id=0)
    out = sample_loop(counting_step(8), jnp.int32(0), bos_id=jnp.array([6, 3, 2]), **kwargs)
    assert out.tokens[0, :3].tolist() == [7, 0, eos]
    assert out.tokens[1, :6].tolist() == [4, 5, 6, 7, 0, eos]
    assert int(out.steps) == 7  # row 2: 3 .. 0 then eos at step 7
    # Row 2 finished from the start (a batch filler): only pad, and it no longer sets the pace.
    filler = jnp.array([False, False, True])
    out = sample_loop(
        counting_step(8), jnp.int32(0), bos_id=jnp.array([6, 3, 2]), finished=filler, **kwargs
    )
    assert int(out.steps) == 6
    assert out.tokens[2].tolist() == [0] * 10
    assert out.tokens[1, :6].tolist() == [4, 5, 6, 7, 0, eos]
    # A scalar bos_id still starts every row alike.
    out = sample_loop(counting_step(8), jnp.int32(0), bos_id=6, **kwargs)
    assert out.tokens[:, 0].tolist() == [7, 7, 7]
