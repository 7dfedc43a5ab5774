"""`python -m transformer_jax.embed`: the short name of `transformer_jax.cli.embed`."""

import sys

from transformer_jax.cli.embed import main

if __name__ == "__main__":
    sys.exit(main())
