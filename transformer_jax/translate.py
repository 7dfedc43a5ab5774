"""`python -m transformer_jax.translate`: the short name of `transformer_jax.cli.translate`."""

import sys

from transformer_jax.cli.translate import main

if __name__ == "__main__":
    sys.exit(main())
