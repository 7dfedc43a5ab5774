"""`python -m transformer_jax.compile`: the short name of `transformer_jax.cli.compile`."""

import sys

from transformer_jax.cli.compile import main

if __name__ == "__main__":
    sys.exit(main())
