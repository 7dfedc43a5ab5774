"""Training-time augmentation of image batches, in NumPy: random rotations and scalings,
shifts and mirror flips.

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


def rotate_and_scale(images: np.ndarray, angles: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Rotates each image by its angle and scales it by its factor about the image centre,
    sampling bilinearly; what comes from outside the frame is 0.

    Output pixel centre p (relative to the image centre, y down, x right) takes the input at
    R(-angle) p / scale, so a positive angle turns the content clockwise on screen and a scale
    above 1 enlarges it.

    Args:
      images: [B, H, W, C].
      angles: [B] radians.
      scales: [B] factors > 0.

    Returns:
      [B, H, W, C] float32.
    """
    b, h, w, _ = images.shape
    cy, cx = (h - 1) / 2, (w - 1) / 2
    y, x = np.meshgrid(np.arange(h) - cy, np.arange(w) - cx, indexing="ij")  # [H, W] each
    cos, sin = (np.cos(angles) / scales)[:, None, None], (np.sin(angles) / scales)[:, None, None]
    src_y = cos * y - sin * x + cy  # [B, H, W]: R(-angle) p / scale, back in pixel indices
    src_x = sin * y + cos * x + cx
    y0, x0 = np.floor(src_y).astype(np.int64), np.floor(src_x).astype(np.int64)
    fy = (src_y - y0)[..., None].astype(np.float32)  # [B, H, W, 1]
    fx = (src_x - x0)[..., None].astype(np.float32)
    padded = np.pad(images.astype(np.float32), ((0, 0), (1, 1), (1, 1), (0, 0)))
    # Indices into `padded`, clipped into its zero border: a source outside reads zeros.
    rows0, rows1 = np.clip(y0 + 1, 0, h + 1), np.clip(y0 + 2, 0, h + 1)
    cols0, cols1 = np.clip(x0 + 1, 0, w + 1), np.clip(x0 + 2, 0, w + 1)
    n = np.arange(b)[:, None, None]
    return (
        padded[n, rows0, cols0] * (1 - fy) * (1 - fx)
        + padded[n, rows0, cols1] * (1 - fy) * fx
        + padded[n, rows1, cols0] * fy * (1 - fx)
        + padded[n, rows1, cols1] * fy * fx
    )


def random_rotate_and_scale(
    images: np.ndarray, max_degrees: float, max_scale: float, rng: np.random.Generator
) -> np.ndarray:
    """`rotate_and_scale` by a uniform angle in [-max_degrees, max_degrees] and a uniform
    factor in [1 - max_scale, 1 + max_scale], drawn per image.

    Args:
      images: [B, H, W, C].
      max_degrees: >= 0.
      max_scale: in [0, 1).
      rng: the random generator (draws B * 2 floats).

    Returns:
      [B, H, W, C] float32.
    """
    if max_degrees < 0 or not 0 <= max_scale < 1:
        raise ValueError(
            f"random_rotate_and_scale: max_degrees={max_degrees}, max_scale={max_scale}; use "
            f"max_degrees >= 0 and 0 <= max_scale < 1."
        )
    b = images.shape[0]
    angles = np.deg2rad(rng.uniform(-max_degrees, max_degrees, size=b))
    scales = rng.uniform(1 - max_scale, 1 + max_scale, size=b)
    return rotate_and_scale(images, angles, scales)


def augment_batch(
    images: np.ndarray,
    max_shift: int,
    flip: bool,
    rng: np.random.Generator,
    max_degrees: float = 0.0,
    max_scale: float = 0.0,
) -> np.ndarray:
    """`random_flip` (when `flip`), `random_rotate_and_scale` (when `max_degrees` or
    `max_scale`), then `random_shift` by up to `max_shift`: [B, H, W, C]."""
    if flip:
        images = random_flip(images, rng)
    if max_degrees or max_scale:
        images = random_rotate_and_scale(images, max_degrees, max_scale, rng).astype(images.dtype)
    return random_shift(images, max_shift, rng)
