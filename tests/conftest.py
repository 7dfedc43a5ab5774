"""Test set-up: fake 8 CPU devices so that every sharding path runs on a laptop."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
