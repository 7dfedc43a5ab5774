"""`python -m transformer_jax.generate`, kept for one release: the command is
`python -m transformer_jax generate` (or `transformer-jax generate`)."""

import sys

from transformer_jax.cli.generate import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("generate", main))
