"""Metric sums of a classifier's logits, and the figures made from them (any labelled task).

Sums, not means, so that batches and devices add up exactly; the confusion matrix is among them,
so accuracy and macro-F1 of a whole split come out exact. Padding rows have weight 0.

Letters: B batch, K labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from transformer_jax.tasks.losses import label_smoothed_cross_entropy

TOP_K = 5  # Top-5 accuracy is reported when there are more than this many labels.


def label_sums(
    logits: Float[Array, "B K"],
    labels: Int[Array, " B"],
    weights: Float[Array, " B"],
    *,
    smoothing: float = 0.0,
) -> dict[str, jax.Array]:
    """Sums of the (label-smoothed) cross-entropy, the plain NLL, correct predictions (and
    top-5 correct when K > 5), examples, and the confusion matrix `[K, K]` (rows true labels)."""
    weights = weights.astype(jnp.float32)
    k = logits.shape[-1]
    smoothed = label_smoothed_cross_entropy(logits[:, None], labels[:, None], smoothing)[:, 0]
    nll = label_smoothed_cross_entropy(logits[:, None], labels[:, None], 0.0)[:, 0]
    predicted = jnp.argmax(logits, -1)
    sums = {
        "loss_sum": (smoothed * weights).sum(),
        "nll_sum": (nll * weights).sum(),
        "correct": ((predicted == labels) * weights).sum(),
        "examples": weights.sum(),
        "confusion": jnp.einsum(
            "bi,bj->ij", jax.nn.one_hot(labels, k) * weights[:, None], jax.nn.one_hot(predicted, k)
        ),
    }
    if k > TOP_K:
        _, top = jax.lax.top_k(logits, TOP_K)  # [B, 5]
        sums["correct_top5"] = ((top == labels[:, None]).any(-1) * weights).sum()
    return sums


def label_summary(sums: Mapping[str, Any]) -> dict[str, float]:
    """Loss, NLL, accuracy (and top-5 accuracy) and macro-F1 over the labels that occur."""
    examples = max(float(sums["examples"]), 1.0)
    confusion = np.asarray(sums["confusion"], np.float64)
    support = confusion.sum(0) + confusion.sum(1)
    present = support > 0
    f1 = 2 * np.diag(confusion)[present] / support[present] if present.any() else np.zeros(1)
    out = {
        "loss": float(sums["loss_sum"]) / examples,
        "nll": float(sums["nll_sum"]) / examples,
        "accuracy": float(sums["correct"]) / examples,
        "macro_f1": float(f1.mean()),
        "examples": float(sums["examples"]),
    }
    if "correct_top5" in sums:
        out["top5_accuracy"] = float(sums["correct_top5"]) / examples
    return out


def describe(metrics: Mapping[str, float]) -> str:
    """`accuracy 97.50%, top-5 99.90%, macro-F1 97.40%`."""
    parts = [f"accuracy {100 * metrics['accuracy']:.2f}%"]
    if "top5_accuracy" in metrics:
        parts.append(f"top-5 {100 * metrics['top5_accuracy']:.2f}%")
    parts.append(f"macro-F1 {100 * metrics['macro_f1']:.2f}%")
    return ", ".join(parts)


def confusion_table(confusion: np.ndarray, names: tuple[str, ...]) -> str:
    """The confusion matrix as text: rows true labels, columns predicted."""
    width = max(8, *(len(n) for n in names)) + 1
    lines = [
        "  " + "true \\ predicted".ljust(width) + "".join(n[:width].rjust(width) for n in names)
    ]
    for name, row in zip(names, np.asarray(confusion).astype(int), strict=True):
        lines.append("  " + name.ljust(width) + "".join(str(v).rjust(width) for v in row))
    return "\n".join(lines)
