"""`python -m transformer_jax.compile`, kept for one release: the command is
`python -m transformer_jax compile` (or `transformer-jax compile`)."""

import sys

from transformer_jax.cli.compile import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("compile", main))
