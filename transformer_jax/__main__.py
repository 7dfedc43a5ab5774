"""`python -m transformer_jax SUBCOMMAND [flags]`: the `transformer-jax` command, for where the
console script is not on the PATH (a notebook, Colab). `python -m transformer_jax --help` lists
the subcommands."""

import sys

from transformer_jax.cli import MODULE_PROG, main

if __name__ == "__main__":
    sys.exit(main(prog=MODULE_PROG))
