"""`python -m transformer_jax.classify_image`, kept for one release: the command is
`python -m transformer_jax classify-image` (or `transformer-jax classify-image`)."""

import sys

from transformer_jax.cli.classify_image import main
from transformer_jax.deprecation import deprecated_command

if __name__ == "__main__":
    sys.exit(deprecated_command("classify-image", main))
