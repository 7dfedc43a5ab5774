"""Running train.py for tests: one subprocess, one device, its stderr kept in the workdir."""

import os
import pathlib
import subprocess
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[1]


def train_once(workdir: pathlib.Path, config: str, *overrides: str) -> pathlib.Path:
    """Runs train.py in a subprocess on one device; keeps its stderr in workdir/train.stderr."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    cmd = [sys.executable, str(_ROOT / "train.py"), f"--config={config}", f"--workdir={workdir}"]
    proc = subprocess.run(
        [*cmd, *overrides], cwd=_ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (workdir / "train.stderr").write_text(proc.stderr)
    return workdir
