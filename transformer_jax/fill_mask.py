"""`python -m transformer_jax.fill_mask`, kept for one release: the command is
`python -m transformer_jax fill-mask` (or `transformer-jax fill-mask`)."""

import sys

from transformer_jax.cli.fill_mask import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("fill-mask", main))
