"""`python -m transformer_jax.classify`, kept for one release: the command is
`python -m transformer_jax classify` (or `transformer-jax classify`)."""

import sys

from transformer_jax.cli.classify import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("classify", main))
