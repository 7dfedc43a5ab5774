"""Faults around a run: a busy or unwritable workdir, non-finite steps."""

import json
import os
import pathlib
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.train_runs import PyProcess, run_train_py, subprocess_env
from transformer_jax.runs.layout import Workdir
from transformer_jax.runs.lock import WorkdirBusyError, WorkdirLock, WorkdirNotWritableError
from transformer_jax.training.nonfinite import NonFiniteCounter, NonFiniteError
from transformer_jax.training.step import all_finite

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = subprocess_env()  # One device: faster.
_HOLD = (
    "import sys, time\n"
    "from transformer_jax.runs.lock import WorkdirLock\n"
    "from transformer_jax.runs.layout import Workdir\n"
    "WorkdirLock(Workdir.at(sys.argv[1])).acquire()\n"
    "print('locked', flush=True)\n"
    "time.sleep(600)\n"
)


def _train(workdir, *overrides):
    return run_train_py(["--config=configs/tiny.py", f"--workdir={workdir}", *overrides], ENV)


@pytest.fixture
def held(tmp_path):
    """A process holding tmp_path's lock (as a running train.py does)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "locked"
    yield proc
    proc.kill()
    proc.wait()


def test_second_run_on_a_busy_workdir_refuses_naming_the_first(tmp_path, held):
    started = time.time()
    proc = _train(tmp_path)
    assert proc.returncode != 0
    assert f"in use by another training run: pid {held.pid} on host" in proc.stderr
    assert "pass another --workdir" in proc.stderr
    assert not (tmp_path / "config.json").exists()  # Refused before writing anything.
    print(f"refused in {time.time() - started:.1f} s")


def test_a_killed_run_does_not_leave_the_lock_stuck(tmp_path, held):
    with pytest.raises(WorkdirBusyError, match=f"pid {held.pid}"):
        WorkdirLock(Workdir.at(tmp_path)).acquire()
    held.kill()  # SIGKILL: no cleanup runs.
    held.wait()
    with WorkdirLock(Workdir.at(tmp_path)) as lock:
        info = json.loads((tmp_path / "run.lock").read_text())
        assert info["pid"] == os.getpid() and info["token"] == lock.token
    with WorkdirLock(Workdir.at(tmp_path)):  # Released on exit: free again.
        pass


def test_object_store_lease_refuses_while_fresh_and_is_taken_over_when_stale(tmp_path):
    def lease():
        lock = WorkdirLock(Workdir.at(tmp_path), heartbeat_s=0.2, stale_after_s=2.0)
        lock.remote = True  # The lease protocol used for gs:// workdirs, on a local folder.
        return lock

    first = lease().acquire()
    time.sleep(0.6)
    beat = json.loads((tmp_path / "run.lock").read_text())["heartbeat"]
    assert time.time() - beat < 0.5  # The holder renews its lease.
    with pytest.raises(WorkdirBusyError, match="last heartbeat"):
        lease().acquire()
    first._stop.set()  # The holder dies without releasing: its heartbeats stop.
    first._thread.join()
    time.sleep(2.1)
    second = lease().acquire()
    assert json.loads((tmp_path / "run.lock").read_text())["token"] == second.token
    second.release()
    assert not (tmp_path / "run.lock").exists()


def test_unwritable_workdir_fails_before_the_first_step(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(WorkdirNotWritableError, match="cannot write to the workdir"):
        WorkdirLock(Workdir.at(blocker / "run")).acquire()
    proc = _train(blocker / "run")
    assert proc.returncode != 0
    assert f"cannot write to the workdir {blocker / 'run'}" in proc.stderr
    assert "step 1" not in proc.stderr


def test_all_finite_and_the_counter():
    assert bool(all_finite({"a": jnp.ones(3), "n": jnp.arange(3)}))
    assert not bool(all_finite({"a": jnp.array([1.0, jnp.inf])}))
    assert not bool(all_finite([jnp.array(jnp.nan)]))
    counter = NonFiniteCounter(3)
    for step, flag in enumerate([1.0, 1.0, 0.0, 1.0, 1.0], start=1):
        counter.update(step, flag)
    assert counter.total == 4 and counter.in_a_row == 2
    with pytest.raises(NonFiniteError, match=r"steps 4-6: 3 steps in a row"):
        counter.update(6, 1.0)


def test_a_nonfinite_step_changes_nothing_and_is_counted():
    from tests.training.test_parallel import CFG, LOSS, _batch
    from transformer_jax import sharding as shd
    from transformer_jax.training import step as ts
    from transformer_jax.training.optimizer import make_optimizer
    from transformer_jax.training.state import create_train_state

    def poisoned(model, batch, rng, deterministic):  # NaN where the batch says so
        loss, sums = LOSS(model, batch, rng, deterministic)
        return loss * batch["poison"][0], sums

    tx, _ = make_optimizer(CFG.d_model, warmup_steps=10)
    mesh = shd.make_mesh({"data": 1}, devices=jax.devices()[:1])
    graphdef, state, shardings = create_train_state(CFG, tx, mesh, seed=0)
    train_fn, _ = ts.compile_steps(graphdef, tx, shardings, mesh, loss_fn=poisoned)
    before = jax.device_get((state.params, state.opt_state))
    batch = _batch(0) | {"poison": np.full((16,), np.nan, np.float32)}
    state, metrics = train_fn(state, ts.global_batch(batch, mesh), jax.random.key(0))
    assert float(metrics["nonfinite"]) == 1.0 and int(state.step) == 1
    jax.tree.map(
        np.testing.assert_array_equal, jax.device_get((state.params, state.opt_state)), before
    )
    batch["poison"][:] = 1.0
    state, metrics = train_fn(state, ts.global_batch(batch, mesh), jax.random.key(0))
    assert float(metrics["nonfinite"]) == 0.0 and int(state.step) == 2
    moved = jax.tree.map(
        lambda a, b: not np.array_equal(a, b), jax.device_get(state.params), before[0]
    )
    assert all(jax.tree.leaves(moved))


@pytest.mark.slow
def test_nonfinite_steps_stop_the_run_and_keep_the_last_checkpoint(tmp_path):
    first = _train(tmp_path, "--config.num_train_steps=8", "--config.checkpoint_every=4",
                   "--config.eval_bleu_sentences=0", "--config.test_sentences=0")  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    saved = tmp_path / "checkpoints" / "8"
    files = {p: p.read_bytes() for p in saved.rglob("*") if p.is_file()}
    proc = PyProcess(
        ROOT / "tests/training/helpers/nan_run.py", [tmp_path, 24], ENV | {"PYTHONPATH": str(ROOT)}
    )
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, err[-3000:]
    assert "steps 9-11: 3 steps in a row had a NaN or Inf loss" in err
    assert f"newest checkpoint, step 8 in {tmp_path}/checkpoints" in err
    steps = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert steps == ["4", "8"]
    assert {p: p.read_bytes() for p in saved.rglob("*") if p.is_file()} == files
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    logged = [r["nonfinite_steps"] for r in rows if r["split"] == "train" and r["step"] > 8]
    assert logged == [1.0, 1.0, 1.0]  # Steps 9-11; no step after the third.
