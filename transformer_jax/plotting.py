"""Figures of a run: its loss and validation curves, and a classifier's confusion matrix
(matplotlib, imported when a figure is drawn). The `plot` command and the notebooks draw these.

    from transformer_jax.plotting import plot_curves
    plot_curves("runs/default")  # -> runs/default/curves.png
"""

from __future__ import annotations

import json
import os

from transformer_jax import storage
from transformer_jax.runs.layout import Workdir
from transformer_jax.runs.metrics import read_metrics

__all__ = ["loss_label", "plot_confusion", "plot_curves", "read_metrics", "validation_series"]


# Validation scores that are percentages or 0-100 scores, in the order they are drawn: (metric,
# label, scale to 0-100). Every task logs some of them; a language model logs none and gets
# BITS instead (lower is better: another axis).
SCORES = (
    ("bleu", "BLEU", 1.0),
    ("chrf", "chrF", 1.0),
    ("exact_match", "exact match %", 100.0),
    ("accuracy", "accuracy %", 100.0),
    ("macro_f1", "macro-F1 %", 100.0),
    ("mlm_accuracy", "masked-LM accuracy %", 100.0),
    ("nsp_accuracy", "next-sentence accuracy %", 100.0),
)
BITS = (("bits_per_byte", "bits per byte", 1.0), ("bits_per_token", "bits per token", 1.0))


def validation_series(evals: list[dict]) -> tuple[str, list[tuple[str, list, list]]]:
    """(y-axis label, [(series label, steps, values)]) of the validation scores in `evals` (the
    eval rows of metrics.jsonl): the 0-100 scores the rows carry, else the bits of a language
    model; no series when the rows carry neither."""
    for table, ylabel in ((SCORES, "score (0-100)"), (BITS, "bits (lower is better)")):
        series = []
        for key, label, scale in table:
            rows = [r for r in evals if key in r]
            if rows:
                series.append((label, [r["step"] for r in rows], [scale * r[key] for r in rows]))
        if series:
            return ylabel, series
    return "", []


def loss_label(workdir: str | os.PathLike) -> str:
    """The y label of the loss panel: says when the run's config smooths the labels."""
    try:
        config = json.loads(Workdir.at(workdir).config_json.read_text())
        smoothing = float(config.get("label_smoothing") or 0.0)
    except (OSError, ValueError, TypeError, AttributeError):  # no config.json: a bare metrics file
        smoothing = 0.0
    return f"loss (label smoothing {smoothing:g})" if smoothing else "loss"


def plot_curves(workdir: str | os.PathLike, output: str | os.PathLike | None = None):
    """Write the loss / validation-score figure of `workdir` to `output` (default
    workdir/curves.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = read_metrics(workdir)
    output = storage.as_path(output) if output else Workdir.at(workdir).curves
    fig, (ax_loss, ax_scores) = plt.subplots(1, 2, figsize=(11, 4))
    for split, style in (("train", "-"), ("eval", "o-")):
        rows = [r for r in metrics.get(split, []) if "loss" in r]
        if rows:
            ax_loss.plot([r["step"] for r in rows], [r["loss"] for r in rows], style, label=split)
    nll = [r for r in metrics.get("eval", []) if "nll" in r]
    if nll and any(r["nll"] != r.get("loss") for r in nll):
        ax_loss.plot([r["step"] for r in nll], [r["nll"] for r in nll], "s--", label="eval nll")
    ax_loss.set(xlabel="step", ylabel=loss_label(workdir), yscale="log", title="Loss")
    if ax_loss.lines:
        ax_loss.legend()
    ylabel, series = validation_series(metrics.get("eval", []))
    styles = ("o-", "s--", "^:", "d-.", "v-", "x--", "*-")  # one per entry of SCORES
    for (label, steps, values), style in zip(series, styles, strict=False):
        ax_scores.plot(steps, values, style, label=label)
    if series:
        ax_scores.legend()
    else:
        ax_scores.text(0.5, 0.5, "no validation scores logged", ha="center", va="center")
    ax_scores.set(xlabel="step", ylabel=ylabel, title="Validation")
    fig.suptitle(str(workdir))
    fig.tight_layout()
    with output.open("wb") as f:
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)
    return output


def plot_confusion(
    confusion, names: tuple[str, ...], output: str | os.PathLike, *, title: str = ""
):
    """Writes a confusion matrix (rows true labels, columns predicted; counts in the cells)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    counts = np.asarray(confusion, np.int64)
    size = min(2.5 + 0.45 * len(names), 30.0)
    fig = Figure(figsize=(size + 1.0, size), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    shown = ax.imshow(counts, cmap="Blues")
    ax.set_xticks(range(len(names)), labels=names, rotation=90, fontsize=8)
    ax.set_yticks(range(len(names)), labels=names, fontsize=8)
    ax.set(xlabel="predicted", ylabel="true")
    if len(names) <= 30:
        high = counts.max() / 2 if counts.size else 0
        for (i, j), count in np.ndenumerate(counts):
            color = "white" if count > high else "black"
            ax.text(j, i, str(count), ha="center", va="center", fontsize=7, color=color)
    if title:
        ax.set_title(title, fontsize=8)
    fig.colorbar(shown, ax=ax, fraction=0.05)
    fig.tight_layout()
    output = storage.as_path(output)
    with output.open("wb") as f:
        fig.savefig(f, format="png")
    return output
