"""`python -m transformer_jax.plot`, kept for one release: the command is
`python -m transformer_jax plot` (or `transformer-jax plot`). `read_metrics`, `plot_curves` and
`plot_confusion` are served from their homes with a warning: `transformer_jax.runs.metrics`
and `transformer_jax.plotting`."""

import sys

from transformer_jax.cli.plot import main
from transformer_jax.deprecation import deprecated_command, deprecated_names

__getattr__ = deprecated_names(
    __name__,
    {
        "read_metrics": "transformer_jax.runs.metrics.read_metrics",
        "plot_curves": "transformer_jax.plotting.plot_curves",
        "plot_confusion": "transformer_jax.plotting.plot_confusion",
    },
)

if __name__ == "__main__":
    sys.exit(deprecated_command("plot", main))
