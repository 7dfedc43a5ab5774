"""`python -m transformer_jax.classify_image`: the short name of
`transformer_jax.cli.classify_image`."""

import sys

from transformer_jax.cli.classify_image import main

if __name__ == "__main__":
    sys.exit(main())
