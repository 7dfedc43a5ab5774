"""Classification scores in plain NumPy, shared by the fine-tuned model and the baselines.

Shapes: N examples, K labels. Labels and predictions are label indices in [0, K).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _checked(labels: ArrayLike, predictions: ArrayLike, num_labels: int):
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.ndim != 1 or labels.shape != predictions.shape:
        raise ValueError(
            f"labels {labels.shape} and predictions {predictions.shape} must both be [N]."
        )
    if not len(labels):
        raise ValueError("No examples to score: labels and predictions are empty.")
    for name, values in (("labels", labels), ("predictions", predictions)):
        if not np.issubdtype(values.dtype, np.integer):
            raise ValueError(f"{name} must be integer label indices, got dtype {values.dtype}.")
        if values.min() < 0 or values.max() >= num_labels:
            raise ValueError(
                f"{name} must lie in [0, {num_labels}), got [{values.min()}, {values.max()}]."
            )
    return labels.astype(np.int64), predictions.astype(np.int64)


def confusion_matrix(labels: ArrayLike, predictions: ArrayLike, num_labels: int) -> np.ndarray:
    """Counts of (true label, predicted label).

    Args:
      labels: int [N] true labels.
      predictions: int [N] predicted labels.
      num_labels: K.

    Returns:
      int64 [K, K]: entry [i, j] = examples of label i predicted as j (rows true, cols predicted).
    """
    labels, predictions = _checked(labels, predictions, num_labels)
    flat = np.bincount(labels * num_labels + predictions, minlength=num_labels * num_labels)
    return flat.reshape(num_labels, num_labels)


def accuracy(labels: ArrayLike, predictions: ArrayLike) -> float:
    """Fraction of predictions equal to the label.

    Args:
      labels: int [N].
      predictions: int [N].

    Returns:
      A float in [0, 1].
    """
    labels, predictions = np.asarray(labels), np.asarray(predictions)
    if labels.ndim != 1 or labels.shape != predictions.shape or not len(labels):
        raise ValueError(
            f"labels {labels.shape} and predictions {predictions.shape} must both be [N], N > 0."
        )
    return float(np.mean(labels == predictions))


def macro_f1(labels: ArrayLike, predictions: ArrayLike, num_labels: int) -> float:
    """Unweighted mean over labels of F1 = 2 TP / (2 TP + FP + FN).

    The mean is over the labels that occur in `labels` or `predictions` (a label that occurs in
    neither says nothing about the classifier), as in `sklearn.metrics.f1_score(average="macro")`;
    a label predicted but never true, or true but never predicted, has F1 0.

    Args:
      labels: int [N] true labels.
      predictions: int [N] predicted labels.
      num_labels: K.

    Returns:
      A float in [0, 1].
    """
    counts = confusion_matrix(labels, predictions, num_labels)
    true_pos = np.diag(counts)
    support = counts.sum(axis=1) + counts.sum(axis=0)  # 2 TP + FP + FN, per label.
    present = support > 0
    return float(np.mean(2 * true_pos[present] / support[present]))
