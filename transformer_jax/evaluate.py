"""`python -m transformer_jax.evaluate`, kept for one release: the command is
`python -m transformer_jax evaluate` (or `transformer-jax evaluate`)."""

import sys

from transformer_jax.cli.evaluate import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("evaluate", main))
