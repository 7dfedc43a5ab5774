"""Plot a workdir's curves.

    python -m transformer_jax plot --workdir=DIR [--output=FILE.png]

Left: training and validation loss (the run's training objective, label-smoothed where its
config smooths, and the plain `nll` where the task logs it); right: the task's validation
scores against the step (BLEU, chrF and exact match for translation; accuracy and macro-F1 for
classifiers; masked-LM and next-sentence accuracy for BERT pretraining; bits per byte and per
token for a language model). The PNG goes to `DIR/curves.png` unless `--output` says
otherwise; its path is printed.
The figures are drawn by `transformer_jax.plotting` (also `plot_confusion`, a classifier's
confusion matrix, which the evaluate command writes per split).
"""

from __future__ import annotations

import sys

from absl import flags

from transformer_jax.cli import common
from transformer_jax.plotting import plot_curves


def define_flags(fv: flags.FlagValues) -> None:
    common.workdir_flag(fv)
    flags.DEFINE_string("output", None, "PNG path (default: WORKDIR/curves.png).", flag_values=fv)


def plot(fv: flags.FlagValues, args: list[str]) -> int:
    print(plot_curves(fv.workdir, fv.output))
    return 0


COMMAND = common.Command("python -m transformer_jax plot", __doc__, define_flags, plot)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
