"""Label-smoothed cross-entropy (§5.4) and per-token metrics, as pure functions.

Letters: B batch, T target length, V vocabulary.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int


@jax.custom_vjp
def logit_terms(
    logits: Float[Array, "B T V"], targets: Int[Array, "B T"]
) -> tuple[Float[Array, "B T"], Float[Array, "B T"], Float[Array, "B T"], Float[Array, "B T"]]:
    """(log-sum-exp, the target's logit, the sum of the logits, whether the target is the
    argmax) per token, in float32: every cross-entropy term and the accuracy come from these.

    Written so that the `[B, T, V]` logits are read as few times as XLA allows: after the
    maximum, one pass of sibling reductions (XLA fuses them) gives the rest, the argmax
    included (the target is the first index at the maximum, as `jnp.argmax` picks); the target
    is picked by comparing with an iota, not gathered (a gather's gradient scatters into a zero
    `[B, T, V]` array); and the gradient is one elementwise expression, g_lse * softmax +
    g_target * onehot + g_sum, in the logits' dtype. The argmax flag has no gradient.
    """
    return _logit_terms(logits, targets)


def _logit_terms(logits, targets):
    x = logits.astype(jnp.float32)
    peak = jnp.max(x, axis=-1, keepdims=True)
    lse = peak[..., 0] + jnp.log(jnp.sum(jnp.exp(x - peak), axis=-1))
    index = jnp.arange(x.shape[-1])
    hit = index == targets[..., None]
    target_logit = jnp.sum(jnp.where(hit, x, 0.0), axis=-1)
    # A sum, not `any`: XLA fuses it with the sums beside it (an `any` took a pass of its own).
    earlier_best = jnp.sum(jnp.where((x == peak) & (index < targets[..., None]), 1.0, 0.0), -1)
    is_argmax = (target_logit == peak[..., 0]) & (earlier_best == 0)
    return lse, target_logit, jnp.sum(x, axis=-1), is_argmax.astype(jnp.float32)


def _logit_terms_fwd(logits, targets):
    terms = _logit_terms(logits, targets)
    return terms, (logits, targets, terms[0])


def _logit_terms_bwd(residuals, cotangents):
    logits, targets, lse = residuals
    g_lse, g_target, g_sum, _ = (g[..., None] for g in cotangents)
    x = logits.astype(jnp.float32)
    hit = jnp.arange(x.shape[-1]) == targets[..., None]
    grad = g_lse * jnp.exp(x - lse[..., None]) + jnp.where(hit, g_target, 0.0) + g_sum
    return grad.astype(logits.dtype), None


logit_terms.defvjp(_logit_terms_fwd, _logit_terms_bwd)


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
    return _token_losses(logits, targets, epsilon)[0]


def _token_losses(logits, targets, epsilon: float):
    """(smoothed loss, NLL, correct) per token from one set of reductions over the vocabulary."""
    vocab = logits.shape[-1]
    if not 0.0 <= epsilon < 1.0:
        raise ValueError(f"label smoothing epsilon must be in [0, 1), got {epsilon}.")
    lse, target_logit, total, correct = logit_terms(logits, targets)
    nll = lse - target_logit  # -log p_target
    if epsilon == 0.0:
        return nll, nll, correct
    confidence, other = 1.0 - epsilon, epsilon / (vocab - 1)
    # -sum_v q_v log p_v with q = other everywhere but confidence at the target, where
    # log p_v = logit_v - lse: the other tokens' share is other * (V lse - sum of logits).
    cross = (confidence - other) * nll + other * (vocab * lse - total)
    entropy = -(confidence * math.log(confidence) + (vocab - 1) * other * math.log(other))
    return cross - entropy, nll, correct


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
    smoothed, nll, correct = _token_losses(logits, targets, epsilon)
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
