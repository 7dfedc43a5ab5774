"""`python -m transformer_jax.plot`, kept for one release: the command is
`python -m transformer_jax plot` (or `transformer-jax plot`). The module also serves
`read_metrics`, `plot_curves` and `plot_confusion` of `transformer_jax.cli.plot`."""

import sys

from transformer_jax.cli.plot import main, plot_confusion, plot_curves, read_metrics
from transformer_jax.deprecation import deprecated_command

__all__ = ["main", "plot_confusion", "plot_curves", "read_metrics"]

if __name__ == "__main__":
    sys.exit(deprecated_command("plot", main))
