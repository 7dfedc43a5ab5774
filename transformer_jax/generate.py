"""`python -m transformer_jax.generate`: the short name of `transformer_jax.cli.generate`."""

import sys

from transformer_jax.cli.generate import main

if __name__ == "__main__":
    sys.exit(main())
