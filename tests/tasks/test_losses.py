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


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_loss_and_its_gradient_equal_the_log_softmax_formula(eps, dtype):
    """The fused terms (log-sum-exp, target logit, logit sum) and their one-pass gradient give
    what the textbook formula over log_softmax gives, values and gradients."""
    B, T, V = 3, 5, 7  # all different
    logits = (4 * jax.random.normal(jax.random.key(0), (B, T, V))).astype(dtype)
    targets = jax.random.randint(jax.random.key(1), (B, T), 0, V)
    weights = jax.random.uniform(jax.random.key(2), (B, T))

    def textbook(logits):
        log_p = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
        q = jnp.where(jax.nn.one_hot(targets, V) > 0, 1 - eps, eps / (V - 1))
        entropy = -jnp.sum(jnp.where(q > 0, q * jnp.log(q), 0.0), -1)
        return jnp.sum((-jnp.sum(q * log_p, -1) - entropy) * weights)

    def fused(logits):
        return jnp.sum(label_smoothed_cross_entropy(logits, targets, eps) * weights)

    tol = 1e-5 if dtype == jnp.float32 else 1e-2
    np.testing.assert_allclose(fused(logits), textbook(logits), rtol=tol)
    got, want = jax.grad(fused)(logits), jax.grad(textbook)(logits)
    assert got.dtype == dtype
    np.testing.assert_allclose(
        np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol
    )


def test_correct_tokens_follow_argmax_ties_included():
    """The accuracy comes from the loss's own reductions: a target counts as correct when it
    is the first index at the maximum, as jnp.argmax picks, ties included."""
    logits = jnp.array([[[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 5.0, 5.0]]])
    targets = jnp.array([[2, 0, 2]])  # a tie lost, a tie won, a tie won at its first index
    sums = token_metrics(logits, targets, jnp.ones((1, 3)), 0.1)
    expected = float(jnp.sum(jnp.argmax(logits, -1) == targets))
    assert float(sums["correct_sum"]) == expected == 2.0
    random = jax.random.normal(jax.random.key(3), (4, 9, 17))
    labels = jax.random.randint(jax.random.key(4), (4, 9), 0, 17)
    sums = token_metrics(random, labels, jnp.ones((4, 9)), 0.0)
    assert float(sums["correct_sum"]) == float(jnp.sum(jnp.argmax(random, -1) == labels))
