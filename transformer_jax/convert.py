"""`python -m transformer_jax.convert`: the short name of `transformer_jax.cli.convert`."""

import sys

from transformer_jax.cli.convert import main

if __name__ == "__main__":
    sys.exit(main())
