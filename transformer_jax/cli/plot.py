"""Plot a workdir's curves.

    python -m transformer_jax.plot --workdir=DIR [--output=FILE.png]

Left: training and validation loss; right: validation BLEU and exact match, against the step.
The PNG goes to `DIR/curves.png` unless `--output` says otherwise; its path is printed.
`read_metrics` reads a workdir's logged metrics, `plot_confusion` draws a classifier's
confusion matrix (the evaluate command writes one per split).
"""

from __future__ import annotations

import json
import os
import sys

from absl import flags

from transformer_jax import storage
from transformer_jax.cli import common
from transformer_jax.workdir import Workdir


def read_metrics(workdir: str | os.PathLike) -> dict[str, list[dict]]:
    """Rows of `metrics.jsonl` grouped by split; a step logged twice keeps its last row."""
    path = Workdir.at(workdir).metrics
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: is {workdir} a training workdir?")
    by_split: dict[str, dict[int, dict]] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{number}: not a JSON line ({e}).") from e
        by_split.setdefault(row["split"], {})[row["step"]] = row
    return {split: [rows[s] for s in sorted(rows)] for split, rows in by_split.items()}


def plot_curves(workdir: str | os.PathLike, output: str | os.PathLike | None = None):
    """Write the loss / BLEU figure of `workdir` to `output` (default workdir/curves.png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = read_metrics(workdir)
    output = storage.as_path(output) if output else Workdir.at(workdir).curves
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(11, 4))
    for split, style in (("train", "-"), ("eval", "o-")):
        rows = metrics.get(split, [])
        if rows:
            ax_loss.plot([r["step"] for r in rows], [r["loss"] for r in rows], style, label=split)
    ax_loss.set(xlabel="step", ylabel="label-smoothed loss", yscale="log", title="Loss")
    ax_loss.legend()
    evals = [r for r in metrics.get("eval", []) if "bleu" in r]
    if evals:
        steps = [r["step"] for r in evals]
        ax_bleu.plot(steps, [r["bleu"] for r in evals], "o-", label="BLEU")
        if any("exact_match" in r for r in evals):
            ax_bleu.plot(
                steps, [100 * r.get("exact_match", 0) for r in evals], "s--", label="exact match %"
            )
        ax_bleu.legend()
    ax_bleu.set(xlabel="step", ylabel="score", title="Validation")
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


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv)
    flags.DEFINE_string("output", None, "PNG path (default: WORKDIR/curves.png).", flag_values=fv)


def plot(fv: flags.FlagValues, args: list[str]) -> int:
    print(plot_curves(fv.workdir, fv.output))
    return 0


COMMAND = common.Command("python -m transformer_jax.plot", __doc__, define_flags, plot)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
