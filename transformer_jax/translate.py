"""`python -m transformer_jax.translate`, kept for one release: the command is
`python -m transformer_jax translate` (or `transformer-jax translate`)."""

import sys

from transformer_jax.cli.translate import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("translate", main))
