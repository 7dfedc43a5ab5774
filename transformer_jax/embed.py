"""`python -m transformer_jax.embed`, kept for one release: the command is
`python -m transformer_jax embed` (or `transformer-jax embed`)."""

import sys

from transformer_jax.cli.embed import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("embed", main))
