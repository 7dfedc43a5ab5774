"""`python -m transformer_jax.cli SUBCOMMAND [flags]`: the `transformer-jax` command."""

import sys

from transformer_jax.cli import main

sys.exit(main())
