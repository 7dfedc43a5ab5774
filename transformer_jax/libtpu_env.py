"""Telling libtpu, before JAX loads it, that a machine without TPU chips is not a TPU host.

With libtpu installed (the `aot` extra brings it to compile for TPU targets), every JAX process
loads it when its backends start, also on a machine without a TPU. The first such process on a
machine (the one that takes libtpu's lock file) then prints five lines of errors: it asks a TPU
VM's metadata for its host bounds and worker hostnames and finds neither. Saying that this host
is alone keeps it quiet; a real TPU VM is left alone, and an explicit TPU topology (the `compile`
command's targets) does not depend on these values.
"""

import os

NO_TPU_HOST = {"TPU_WORKER_HOSTNAMES": "localhost", "TPU_HOST_BOUNDS": "1,1,1"}


def tpu_chips_here() -> bool:
    """Whether this machine has TPU chips (JAX's own PCI check; True when it cannot tell, so a
    TPU VM is never told otherwise)."""
    try:
        from jax._src import hardware_utils

        return hardware_utils.num_available_tpu_chips_and_device_id()[0] > 0
    except Exception:  # noqa: BLE001 - a private API that may move: then leave libtpu alone.
        return True


def quiet_libtpu() -> None:
    """Sets NO_TPU_HOST (keeping values already set) when this machine has no TPU chips. Call it
    before JAX's backends start; afterwards it changes nothing."""
    if tpu_chips_here():
        return
    for name, value in NO_TPU_HOST.items():
        os.environ.setdefault(name, value)
