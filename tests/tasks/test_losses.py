"""Label-smoothed cross-entropy (§5.4) against hand computations, and the token metrics that
ignore padding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.tasks.losses import label_smoothed_cross_entropy, summarize, token_metrics


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
