"""`python -m transformer_jax.plot`: the short name of `transformer_jax.cli.plot`, whose
`read_metrics`, `plot_curves` and `plot_confusion` it also serves."""

import sys

from transformer_jax.cli.plot import main, plot_confusion, plot_curves, read_metrics

__all__ = ["main", "plot_confusion", "plot_curves", "read_metrics"]

if __name__ == "__main__":
    sys.exit(main())
