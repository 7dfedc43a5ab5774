"""Test set-up: fake 8 CPU devices so that every sharding path runs on a laptop."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# Check every jaxtyping shape annotation at run time, throughout the test suite: a function that
# returns or receives an array of the wrong shape fails the test that called it.
from jaxtyping import install_import_hook  # noqa: E402

install_import_hook("transformer_jax", "beartype.beartype")
