"""`python -m transformer_jax.fill_mask`: the short name of `transformer_jax.cli.fill_mask`."""

import sys

from transformer_jax.cli.fill_mask import main

if __name__ == "__main__":
    sys.exit(main())
