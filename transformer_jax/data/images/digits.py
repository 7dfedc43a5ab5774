"""scikit-learn's handwritten digits: 1,797 grayscale 8x8 images of 0-9, shipped in its wheel.

The split is stratified: each class is divided between eval, test and train in proportion to
its size (largest remainders decide the rounding, so the totals are exact), the images of each
class drawn at random from `np.random.default_rng([seed, _STREAM])`. The same seed always gives
the same split; the three splits are disjoint and together hold every image.
"""

from __future__ import annotations

import numpy as np

from transformer_jax.data.images.examples import ImageSplit, ImageSplits

LABEL_NAMES = tuple(str(d) for d in range(10))
IMAGE_SHAPE = (8, 8, 1)  # (H, W, C) of every digit.
_STREAM = 0x646967  # Separates this split's random stream from other uses of the seed.


def _load_digits():
    """sklearn.datasets.load_digits(), or an error saying how to install scikit-learn."""
    try:
        from sklearn.datasets import load_digits  # Optional: only this source needs it.
    except ImportError as e:
        raise ImportError(
            "data.source='digits' needs scikit-learn (the digits ship inside its wheel): "
            "pip install 'transformer_jax[vision]'"
        ) from e
    return load_digits()


def proportional_counts(class_sizes: np.ndarray, total: int) -> np.ndarray:
    """Splits `total` between classes in proportion to their sizes, rounding by largest remainder.

    Args:
      class_sizes: int [K], images per class.
      total: images to take overall (at most class_sizes.sum()).

    Returns:
      int64 [K] summing to `total`, each within 1 of total * class_sizes / class_sizes.sum()
      (ties of the remainder go to the lower class index).
    """
    exact = total * class_sizes / class_sizes.sum()
    counts = np.floor(exact).astype(np.int64)
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[: total - counts.sum()]] += 1
    return counts


def digits_split_indices(
    labels: np.ndarray, seed: int, eval_size: int, test_size: int
) -> dict[str, np.ndarray]:
    """The stratified, seeded split of a labelled set into train / eval / test.

    Args:
      labels: int [N], class indices 0..K-1 (every class present).
      seed: seed of the split.
      eval_size: images in eval overall.
      test_size: images in test overall.

    Returns:
      "train" / "eval" / "test" -> int64 indices into `labels`, sorted; disjoint and covering
      range(N); eval and test have exactly `eval_size` and `test_size` entries.

    Raises:
      ValueError: the held-out images would leave a class without training images.
    """
    labels = np.asarray(labels)
    sizes = np.bincount(labels)
    eval_counts = proportional_counts(sizes, eval_size)
    test_counts = proportional_counts(sizes, test_size)
    short = np.flatnonzero(eval_counts + test_counts >= sizes)
    if short.size:
        raise ValueError(
            f"digits: eval_size={eval_size} + test_size={test_size} leave class {short[0]} "
            f"({sizes[short[0]]} images) no training images. Hold out fewer images."
        )
    rng = np.random.default_rng([seed, _STREAM])
    parts = {"train": [], "eval": [], "test": []}
    for label, (n_eval, n_test) in enumerate(zip(eval_counts, test_counts, strict=True)):
        members = rng.permutation(np.flatnonzero(labels == label))
        parts["eval"].append(members[:n_eval])
        parts["test"].append(members[n_eval : n_eval + n_test])
        parts["train"].append(members[n_eval + n_test :])
    return {name: np.sort(np.concatenate(chunks)) for name, chunks in parts.items()}


def digits_dataset(seed: int = 0, eval_size: int = 180, test_size: int = 360) -> ImageSplits:
    """The digits, split by `digits_split_indices`.

    Returns:
      ImageSplits with label_names "0".."9" and images float32 [N, 8, 8, 1] in [0, 1] (the
      0..16 pixel values divided by 16); train holds 1,797 - eval_size - test_size images.
    """
    digits = _load_digits()
    images = (np.asarray(digits.images, np.float32) / 16.0).reshape(-1, *IMAGE_SHAPE)
    labels = np.asarray(digits.target, np.int32)
    indices = digits_split_indices(labels, seed, eval_size, test_size)
    splits = {name: ImageSplit(images[i], labels[i]) for name, i in indices.items()}
    return ImageSplits(LABEL_NAMES, splits)
