"""Where a ViT looks: the [CLS] token's attention over the patches, per layer and head, and
attention rollout across layers (Abnar & Zuidema 2020), drawn over the image as a PNG.

    maps = patch_attention(weights, grid=(4, 4), has_cls=True)   # pure NumPy
    save_attention_png(image, maps, "digit.attention.png", title="7 (p=0.98)")

Letters: L layers, N heads, T tokens ([CLS] + patches), G patches = rows * cols.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class PatchAttention:
    """Attention of one image over its patch grid.

    Attributes:
      per_head: float32 [L, N, rows, cols]: each head's attention from [CLS] to every patch (for
        a model pooled by averaging, the mean over query positions instead).
      rollout: float32 [rows, cols]: the same read through every layer (attention rollout).
    """

    per_head: np.ndarray
    rollout: np.ndarray


def attention_rollout(weights: Sequence[np.ndarray]) -> np.ndarray:
    """Rollout of per-layer attention `[N, T, T]` (L of them) -> `[T, T]`.

    Each layer's heads are averaged and the residual connection is accounted for as
    0.5 A + 0.5 I, rows renormalised; the layers' matrices are multiplied from the first up, so
    row t says how much each input token flows into output t.
    """
    tokens = weights[0].shape[-1]
    rollout = np.eye(tokens, dtype=np.float64)
    for layer in weights:
        a = 0.5 * np.asarray(layer, np.float64).mean(0) + 0.5 * np.eye(tokens)
        a /= a.sum(-1, keepdims=True)
        rollout = a @ rollout
    return rollout


def patch_attention(
    weights: Sequence[np.ndarray], grid: tuple[int, int], *, has_cls: bool
) -> PatchAttention:
    """Per-head and rolled-out attention over the patches of one image.

    Args:
      weights: per layer, float [N, T, T] (query rows sum to 1) of a single image.
      grid: (rows, cols) of the patch grid, row-major; T = rows * cols (+ 1 with [CLS]).
      has_cls: whether token 0 is [CLS] (the model's `pool == "cls"`).
    """
    rows, cols = grid
    first = 1 if has_cls else 0
    if weights[0].shape[-1] != rows * cols + first:
        raise ValueError(
            f"attention over {weights[0].shape[-1]} tokens does not fit a {rows}x{cols} grid "
            f"{'plus [CLS]' if has_cls else ''}."
        )
    stacked = np.stack([np.asarray(w, np.float32) for w in weights])  # [L, N, T, T]
    if has_cls:
        per_head = stacked[:, :, 0, first:]
        rolled = attention_rollout(weights)[0, first:]
    else:
        per_head = stacked.mean(2)
        rolled = attention_rollout(weights).mean(0)
    per_head = per_head.reshape(*stacked.shape[:2], rows, cols)
    return PatchAttention(per_head, (rolled / rolled.sum()).reshape(rows, cols).astype(np.float32))


def _upsample(grid_map: np.ndarray, height: int, width: int) -> np.ndarray:
    """Each patch's value over its pixels."""
    rows, cols = grid_map.shape
    return np.kron(grid_map, np.ones((height // rows, width // cols)))


def save_attention_png(
    image: np.ndarray, maps: PatchAttention, path: str | os.PathLike, *, title: str = ""
) -> pathlib.Path:
    """Writes the image, the rollout over it, and every layer's and head's [CLS] attention
    over it (a row per layer) as one PNG.

    Args:
      image: float [H, W, C] in [0, 1] (C 1 or 3), as the model read it.
      maps: from `patch_attention`.
      path: the PNG to write (parent directories are created).
      title: a line above the figure (e.g. the prediction).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    height, width, channels = image.shape
    shown = image[..., 0] if channels == 1 else image
    cmap = "gray" if channels == 1 else None
    layers, heads = maps.per_head.shape[:2]
    cols = max(heads, 2)
    fig = Figure(figsize=(1.6 * cols, 1.6 * (layers + 1) + 0.4), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(layers + 1, cols, squeeze=False)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_frame_on(False)
    axes[0, 0].imshow(shown, cmap=cmap, vmin=0, vmax=1)
    axes[0, 0].set_title("image", fontsize=8)
    axes[0, 1].imshow(shown, cmap=cmap, vmin=0, vmax=1)
    axes[0, 1].imshow(_upsample(maps.rollout, height, width), cmap="inferno", alpha=0.6)
    axes[0, 1].set_title("rollout", fontsize=8)
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer + 1, head]
            ax.imshow(shown, cmap=cmap, vmin=0, vmax=1)
            overlay = _upsample(maps.per_head[layer, head], height, width)
            ax.imshow(overlay, cmap="inferno", alpha=0.6)
            ax.set_title(f"layer {layer} head {head}", fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
