"""Heatmaps of attention weights, like Figures 3-5 of the paper, written as PNG files.

    result = translator.attention("three hundred and four")
    plot_attention(result, "decoder_cross", layer=1, head=0, path="cross.png")

Uses matplotlib's object API with the Agg canvas: no display, and no change to the global
pyplot backend of the caller.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np

from transformer_jax.inference.translator import ATTENTION_KINDS, AttentionResult

_TITLES = {
    "encoder": "encoder self-attention",
    "decoder_self": "decoder self-attention",
    "decoder_cross": "encoder-decoder attention",
}


def _check_index(name: str, value, count: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < count:
        raise ValueError(f"{name}={value!r} is out of range: the model has {count} (0-based).")


def plot_attention(
    result: AttentionResult, kind: str, layer: int, head: int, path: str | os.PathLike
) -> pathlib.Path:
    """Writes one head of one layer as a labelled heatmap PNG.

    Args:
      result: from `Translator.attention`.
      kind: "encoder", "decoder_self" or "decoder_cross".
      layer: 0-based layer index.
      head: 0-based head index.
      path: the PNG file to write (parent directories are created).

    Returns:
      The path written. Rows are query positions, columns key positions; each row sums to 1.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind {kind!r} is not one of {ATTENTION_KINDS}.")
    layers = result.weights(kind)
    _check_index("layer", layer, len(layers))
    _check_index("head", head, layers[layer].shape[0])
    weights = np.asarray(layers[layer][head], np.float32)
    rows, cols = result.labels(kind)

    width = min(2.5 + 0.3 * len(cols), 40.0)
    height = min(2.0 + 0.3 * len(rows), 40.0)
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(cols)), labels=cols, rotation=90, fontsize=8)
    ax.set_yticks(range(len(rows)), labels=rows, fontsize=8)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(f"{_TITLES[kind]}, layer {layer}, head {head}")
    fig.colorbar(image, ax=ax, fraction=0.05)
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
