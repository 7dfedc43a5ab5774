"""Noam schedule (§5.3) and label-smoothed cross-entropy (§5.4) against closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from transformer_jax.tasks.losses import label_smoothed_cross_entropy, summarize, token_metrics
from transformer_jax.training.schedules import noam_schedule


def test_noam_matches_closed_form_with_steps_from_one():
    d, warmup, factor = 512, 4000, 2.0
    schedule = noam_schedule(d, warmup, factor)
    for count in [0, 1, 10, 3999, 4000, 10_000, 99_999]:
        step = count + 1
        expected = factor * d**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert float(schedule(count)) == pytest.approx(expected, rel=1e-5)
    assert float(schedule(0)) > 0  # Optax's first count is 0: the first update still moves.
    values = np.array([float(schedule(c)) for c in range(0, 12_000, 50)])
    peak = int(np.argmax(values)) * 50 + 1
    assert abs(peak - warmup) <= 50  # rises linearly to the warm-up step, then decays


def test_noam_drives_optax_adam():
    schedule = noam_schedule(64, 10)
    tx = optax.adam(schedule)
    params = {"w": jnp.ones(3)}
    state = tx.init(params)
    updates, _ = tx.update({"w": jnp.ones(3)}, state, params)
    # Adam's first update has magnitude lr(step 1) per coordinate.
    np.testing.assert_allclose(-updates["w"], float(schedule(0)), rtol=1e-4)


@pytest.mark.parametrize("bad", [dict(d_model=0), dict(warmup_steps=-1), dict(factor=0.0)])
def test_noam_rejects_non_positive(bad):
    kwargs = dict(d_model=8, warmup_steps=4, factor=1.0) | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        noam_schedule(**kwargs)


def test_label_smoothing_matches_hand_computation():
    logits = jnp.array([[[2.0, 0.5, -1.0, 0.0]]])  # B=1, T=1, V=4
    target = jnp.array([[1]])
    eps = 0.1
    p = np.exp(np.asarray(logits[0, 0], np.float64))
    p /= p.sum()
    q = np.full(4, eps / 3)
    q[1] = 1 - eps
    kl = float(np.sum(q * (np.log(q) - np.log(p))))
    got = float(label_smoothed_cross_entropy(logits, target, eps)[0, 0])
    assert got == pytest.approx(kl, rel=1e-5)
    nll = float(label_smoothed_cross_entropy(logits, target, 0.0)[0, 0])
    assert nll == pytest.approx(-np.log(p[1]), rel=1e-5)


def test_smoothed_loss_is_minimal_at_the_smoothed_distribution():
    eps, v = 0.1, 5
    target = jnp.array([[2]])
    q = np.full(v, eps / (v - 1))
    q[2] = 1 - eps
    best = jnp.log(jnp.asarray(q))[None, None]
    assert float(label_smoothed_cross_entropy(best, target, eps)[0, 0]) == pytest.approx(
        0, abs=1e-6
    )
    sharp = jnp.zeros((1, 1, v)).at[0, 0, 2].set(20.0)  # over-confident: penalised (§5.4)
    assert float(label_smoothed_cross_entropy(sharp, target, eps)[0, 0]) > 0.5


def test_token_metrics_ignore_padding():
    rng = jax.random.key(0)
    logits = jax.random.normal(rng, (2, 3, 7))
    targets = jnp.array([[1, 2, 0], [4, 0, 0]])
    weights = (targets != 0).astype(jnp.float32)
    sums = token_metrics(logits, targets, weights, 0.1)
    assert float(sums["tokens"]) == 3
    # Changing logits at padded positions changes nothing.
    other = logits.at[0, 2].set(100.0).at[1, 1:].set(-5.0)
    sums2 = token_metrics(other, targets, weights, 0.1)
    for k in sums:
        assert float(sums[k]) == pytest.approx(float(sums2[k]), rel=1e-6)
    means = summarize(jax.device_get(sums))
    assert means["perplexity"] == pytest.approx(np.exp(means["nll"]), rel=1e-5)
    assert 0 <= means["accuracy"] <= 1
