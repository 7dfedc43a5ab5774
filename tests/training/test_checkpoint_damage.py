"""Damaged, unfinished and failed checkpoint saves: resume from the newest intact one, loudly,
keeping the damaged one; never start from scratch while checkpoints exist."""

import logging
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.train_runs import subprocess_env
from transformer_jax.runs.checkpoints import Checkpoints
from transformer_jax.runs.layout import CheckpointError, Workdir

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _state(step):
    return {"w": jnp.full((64, 64), float(step)), "b": jnp.arange(8.0) + step}


def _abstract():
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), _state(0))


def _saved(tmp_path, steps=(1, 2, 3)):
    workdir = Workdir.at(tmp_path)
    ckpt = Checkpoints(workdir, keep=5)
    for step in steps:
        ckpt.save(step, _state(step), {"epoch": step}, {"seed": 0}, force=True)
    ckpt.wait()
    ckpt.close()
    return workdir


def _files(path: pathlib.Path) -> dict[str, bytes]:
    files = sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p.relative_to(path)): p.read_bytes() for p in files}


def _biggest_file(step_dir: pathlib.Path) -> pathlib.Path:
    return max((p for p in (step_dir / "state").rglob("*") if p.is_file()), key=os.path.getsize)


def _restore(workdir, caplog):
    ckpt = Checkpoints(workdir, keep=5)
    try:
        with caplog.at_level(logging.WARNING):
            return ckpt.restore_intact(_abstract())
    finally:
        ckpt.close()


@pytest.mark.parametrize("damage", ["truncated", "deleted", "emptied_metadata"])
def test_damaged_latest_resumes_from_the_one_before_and_keeps_it(tmp_path, caplog, damage):
    workdir = _saved(tmp_path)
    latest = tmp_path / "checkpoints" / "3"
    if damage == "truncated":
        victim = _biggest_file(latest)
        victim.write_bytes(victim.read_bytes()[: os.path.getsize(victim) // 2])
    elif damage == "deleted":
        _biggest_file(latest).unlink()
    else:
        (latest / "data" / "metadata").write_text("")
    before = _files(latest)

    state, data, _ = _restore(workdir, caplog)

    assert float(state["w"][0, 0]) == 2.0 and data == {"epoch": 2}
    kept = tmp_path / "damaged" / "checkpoints" / "3"
    assert _files(kept) == before  # Moved, untouched, never deleted.
    assert not latest.exists()
    assert str(latest) in caplog.text and "resuming from step 2" in caplog.text


def test_unfinished_save_is_set_aside_with_a_warning(tmp_path, caplog):
    workdir = _saved(tmp_path, steps=(1, 2))
    unfinished = tmp_path / "checkpoints" / "3.orbax-checkpoint-tmp-1763900000000000"
    (unfinished / "state").mkdir(parents=True)
    (unfinished / "state" / "partial").write_bytes(b"\0" * 100)

    state, _, _ = _restore(workdir, caplog)

    assert float(state["b"][0]) == 2.0
    assert (tmp_path / "damaged" / "checkpoints" / unfinished.name / "state" / "partial").exists()
    assert str(unfinished) in caplog.text and "unfinished" in caplog.text


def test_no_intact_checkpoint_is_an_error_and_changes_nothing(tmp_path, caplog):
    workdir = _saved(tmp_path, steps=(1, 2))
    for step in (1, 2):
        _biggest_file(tmp_path / "checkpoints" / str(step)).unlink()
    before = _files(tmp_path)
    with pytest.raises(CheckpointError, match="none of the 2 checkpoints") as info:
        _restore(workdir, caplog)
    assert "checkpoints/1" in str(info.value) and "move" in str(info.value)
    assert _files(tmp_path) == before


def test_empty_workdir_restores_nothing(tmp_path, caplog):
    assert _restore(Workdir.at(tmp_path), caplog) is None


_FULL_DISK = """
import resource, signal, sys
import jax, jax.numpy as jnp
from transformer_jax.runs.checkpoints import Checkpoints
from transformer_jax.runs.layout import CheckpointError, Workdir

ckpt = Checkpoints(Workdir.at(sys.argv[1]), keep=5)
state = {"w": jnp.ones((256, 256))}
noise = jax.random.normal(jax.random.key(0), (256, 256))  # Incompressible.
ckpt.save(1, state, {}, {}, force=True)
ckpt.wait()
# The disk is full from now on: writes past 4 KB fail (EFBIG) as they would with ENOSPC.
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    ckpt.save(2, {"w": noise}, {}, {}, force=True)
    ckpt.wait()
    print("SAVED")
except CheckpointError as e:
    print("ERROR:", e)
"""


def test_failed_save_raises_a_clear_error_and_keeps_the_older_checkpoints(tmp_path):
    env = subprocess_env()
    proc = subprocess.run(
        [sys.executable, "-c", _FULL_DISK, str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ERROR: saving step 2" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert "steps [1]" in proc.stdout and "rerun the same command" in proc.stdout
    ckpt = Checkpoints(Workdir.at(tmp_path), keep=5)
    abstract = {"w": jax.ShapeDtypeStruct((256, 256), jnp.float32)}
    state, _, _ = ckpt.restore_intact(abstract)
    ckpt.close()
    np.testing.assert_array_equal(np.asarray(state["w"]), np.ones((256, 256)))
