"""`python -m transformer_jax.convert`, kept for one release: the command is
`python -m transformer_jax convert` (or `transformer-jax convert`)."""

import sys

from transformer_jax.cli.convert import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("convert", main))
