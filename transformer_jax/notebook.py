"""What the notebooks in `notebooks/` share: the fast mode and the environment report.

The fast mode is read here and nowhere else: `TRANSFORMER_JAX_FAST=1` makes every notebook train
for a few dozen steps so that CI can execute them all top to bottom; unset (or 0) is the full
mode a reader runs in Colab. Notebooks choose their sizes with `choose(full=..., fast=...)`.
"""

import importlib.metadata
import os
from typing import TypeVar

import jax

FAST_ENV = "TRANSFORMER_JAX_FAST"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
T = TypeVar("T")


def fast_mode() -> bool:
    """Whether `TRANSFORMER_JAX_FAST` asks for the short runs CI executes."""
    value = os.environ.get(FAST_ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"{FAST_ENV}={os.environ[FAST_ENV]!r} is neither on nor off: set it to 1 for the short "
        "runs CI executes, or to 0 (or unset it) for the full notebook."
    )


def choose(full: T, fast: T) -> T:
    """`fast` in the fast mode, `full` otherwise (a step count, a corpus size, ...)."""
    return fast if fast_mode() else full


def simulate_cpu_devices(count: int) -> None:
    """Makes JAX's CPU backend show `count` devices (accelerators are unaffected).

    Must run before JAX starts its backends; running it again with the same count (a re-run of
    the setup cell) is harmless, another count asks for a restart.
    """
    if count < 1:
        raise ValueError(f"CPU_DEVICES={count}: a runtime has at least one device.")
    if count == 1:
        return  # JAX's default: nothing to ask for.
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:  # JAX has started: fine if it started with what we want.
        have = len(jax.devices("cpu"))
        if have != count:
            raise RuntimeError(
                f"JAX already started with {have} CPU device(s) and this notebook needs {count}: "
                "restart the runtime (Colab: Runtime > Restart session) and run from the top."
            ) from None


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment_report() -> str:
    """Versions of the stack, the devices JAX sees, and the mode, as a few printable lines."""
    versions = ", ".join(
        f"{name} {_version(name)}" for name in ("transformer_jax", "jax", "jaxlib", "flax", "optax")
    )
    devices = jax.devices()
    kinds = sorted({d.device_kind for d in devices})
    mode = f"fast ({FAST_ENV}=1: short runs)" if fast_mode() else "full"
    return "\n".join(
        [
            versions,
            f"backend {jax.default_backend()}: {len(devices)} device(s), {', '.join(kinds)}",
            f"mode: {mode}",
        ]
    )
