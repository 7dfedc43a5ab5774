"""`python -m transformer_jax.classify`: the short name of `transformer_jax.cli.classify`."""

import sys

from transformer_jax.cli.classify import main

if __name__ == "__main__":
    sys.exit(main())
