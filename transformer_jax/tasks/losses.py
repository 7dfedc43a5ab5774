"""Label-smoothed cross-entropy (§5.4) and per-token metrics, as pure functions.

Letters: B batch, T target length, V vocabulary.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int


def label_smoothed_cross_entropy(
    logits: Float[Array, "B T V"],
    targets: Int[Array, "B T"],
    epsilon: float = 0.1,
) -> Float[Array, "B T"]:
    """Cross-entropy against targets smoothed with `epsilon` (§5.4), per token.

    The smoothed distribution puts 1 - epsilon on the target and spreads epsilon evenly over the
    other V - 1 tokens. Its own entropy is subtracted, so a perfect prediction of that
    distribution scores 0 (the value is a KL divergence); with epsilon = 0 it is the plain
    negative log-likelihood.
    """
    vocab = logits.shape[-1]
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon must be in [0, 1), got {epsilon}.")
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    target_lp = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    if epsilon == 0.0:
        return -target_lp
    confidence, other = 1.0 - epsilon, epsilon / (vocab - 1)
    # sum_v q_v log p_v with q = other everywhere but confidence at the target.
    cross = confidence * target_lp + other * (log_probs.sum(-1) - target_lp)
    entropy = -(confidence * jnp.log(confidence) + (vocab - 1) * other * jnp.log(other))
    return -cross - entropy


def token_metrics(
    logits: Float[Array, "B T V"],
    targets: Int[Array, "B T"],
    weights: Float[Array, "B T"],
    epsilon: float = 0.1,
) -> dict[str, Float[Array, ""]]:
    """Sums over non-pad target tokens: smoothed loss, NLL, correct tokens and token count.

    Sums (not means) so that micro-batches, devices and eval batches add up exactly; divide
    with `summarize` at the end.
    """
    weights = weights.astype(jnp.float32)
    smoothed = label_smoothed_cross_entropy(logits, targets, epsilon)
    nll = label_smoothed_cross_entropy(logits, targets, 0.0) if epsilon else smoothed
    correct = (jnp.argmax(logits, -1) == targets).astype(jnp.float32)
    return {
        "loss_sum": (smoothed * weights).sum(),
        "nll_sum": (nll * weights).sum(),
        "correct_sum": (correct * weights).sum(),
        "tokens": weights.sum(),
    }


def summarize(sums: dict) -> dict[str, float]:
    """Mean loss, NLL, token accuracy and perplexity from summed metrics."""
    tokens = max(float(sums["tokens"]), 1.0)
    nll = float(sums["nll_sum"]) / tokens
    return {
        "loss": float(sums["loss_sum"]) / tokens,
        "nll": nll,
        "accuracy": float(sums["correct_sum"]) / tokens,
        "perplexity": float(jnp.exp(jnp.minimum(nll, 50.0))),
        "tokens": float(sums["tokens"]),
    }


def bits_per_byte(nll_nats: float, num_bytes: float) -> float:
    """Total negative log-likelihood in bits over the bytes of the text it scored:
    nll / ln 2 / bytes. A tokenizer-free measure (a compressor's is 8 x compressed / original)."""
    if num_bytes <= 0:
        raise ValueError(f"bits_per_byte needs a positive byte count, got {num_bytes}.")
    return nll_nats / math.log(2.0) / num_bytes
