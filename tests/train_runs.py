"""Running train.py for tests: one subprocess (one device unless asked), its stderr kept in the
workdir; and the environment of every process the tests start."""

import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Callable

_ROOT = pathlib.Path(__file__).resolve().parents[1]
# The tests' programs are tiny: compiling them costs more than running them. Level 0 skips
# LLVM's optimisations, and XLA's older loop emitters (use_fusion_emitters=false) compile a
# train step in about half the time of the MLIR fusion emitters: both choose how the CPU code
# is generated, not what it computes (within float32 rounding, which the tolerances allow).
# conftest.py sets them for the test processes; the processes they start inherit them.
FAST_COMPILE = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def device_flags(devices: int) -> str:
    """XLA_FLAGS for a process of the tests with `devices` CPU devices."""
    count = f"--xla_force_host_platform_device_count={devices} " if devices > 1 else ""
    return count + FAST_COMPILE


def subprocess_env(devices: int = 1, **extra: str) -> dict[str, str]:
    """The tests' environment for a child process (train.py, a CLI, a worker): `devices` CPU
    devices (one unless the test is about sharding: compiling for 8 costs about twice as much),
    the fast-compile flag, the shared compilation cache (inherited), and `extra`."""
    return {**os.environ, "XLA_FLAGS": device_flags(devices), **extra}


def train_once(
    workdir: pathlib.Path, config: str, *overrides: str, devices: int = 1
) -> pathlib.Path:
    """Runs train.py in a subprocess on `devices` CPU devices (one by default); keeps its
    stderr in workdir/train.stderr."""
    env = subprocess_env(devices)
    cmd = [sys.executable, str(_ROOT / "train.py"), f"--config={config}", f"--workdir={workdir}"]
    proc = subprocess.run(
        [*cmd, *overrides], cwd=_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (workdir / "train.stderr").write_text(proc.stderr)
    return workdir


def trained_once(
    tmp_path_factory, name: str, train: Callable[[pathlib.Path], object]
) -> pathlib.Path:
    """A workdir that `train(workdir)` fills, trained once per test session however many
    pytest-xdist workers run it: the first worker to ask trains it in a folder the workers share
    (under a lock), and every worker gets its own copy, so tests that write into their workdir
    (evaluate's outputs) never meet another worker's writes. Without xdist: trained in place."""
    own = tmp_path_factory.mktemp(name)
    if "PYTEST_XDIST_WORKER" not in os.environ:
        train(own)
        return own
    shared = tmp_path_factory.getbasetemp().parent / f"trained_once_{name}"
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes (or the worker dies).
        if not (shared / ".trained").exists():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            train(shared)
            (shared / ".trained").touch()
    shutil.copytree(shared, own, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".trained"))
    return own
