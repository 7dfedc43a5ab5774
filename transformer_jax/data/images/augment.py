"""Training-time augmentation of image batches, in NumPy: random shifts and mirror flips.

Every function takes the batch and a `np.random.Generator` and returns a new batch; the input
is never modified. B batch, H height, W width, C channels.
"""

from __future__ import annotations

import numpy as np


def random_shift(images: np.ndarray, max_shift: int, rng: np.random.Generator) -> np.ndarray:
    """Translates each image by its own uniform integer offsets in [-max_shift, max_shift].

    The offsets in y and x are drawn independently; pixels moved out of the frame are lost and
    the vacated border is 0. A positive offset moves the content down (y) or right (x).

    Args:
      images: [B, H, W, C].
      max_shift: the largest offset in pixels, >= 0 (0 returns `images` itself).
      rng: the random generator (draws B * 2 integers when max_shift > 0).

    Returns:
      [B, H, W, C], same dtype.
    """
    if max_shift < 0:
        raise ValueError(f"random_shift: max_shift={max_shift}; use an integer >= 0.")
    if max_shift == 0:
        return images
    b, h, w, _ = images.shape
    s = max_shift
    padded = np.pad(images, ((0, 0), (s, s), (s, s), (0, 0)))  # [B, H + 2s, W + 2s, C]
    dy, dx = rng.integers(-s, s + 1, size=(2, b))
    # out[y, x] = images[y - dy, x - dx] = padded[y - dy + s, x - dx + s].
    rows = (s - dy)[:, None] + np.arange(h)  # [B, H]
    cols = (s - dx)[:, None] + np.arange(w)  # [B, W]
    return padded[np.arange(b)[:, None, None], rows[:, :, None], cols[:, None, :]]


def random_flip(images: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mirrors each image left-right with probability 1/2.

    Args:
      images: [B, H, W, C].
      rng: the random generator (draws B floats).

    Returns:
      [B, H, W, C], same dtype.
    """
    flip = rng.random(images.shape[0]) < 0.5
    return np.where(flip[:, None, None, None], images[:, :, ::-1], images)


def augment_batch(
    images: np.ndarray, max_shift: int, flip: bool, rng: np.random.Generator
) -> np.ndarray:
    """`random_flip` (when `flip`) then `random_shift` by up to `max_shift`: [B, H, W, C]."""
    if flip:
        images = random_flip(images, rng)
    return random_shift(images, max_shift, rng)
