"""`python -m transformer_jax.evaluate`: the short name of `transformer_jax.cli.evaluate`."""

import sys

from transformer_jax.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
