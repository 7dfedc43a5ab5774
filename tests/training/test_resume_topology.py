"""A run resumes on another topology: saved on 8 devices (data=8), resumed on 4 (fsdp=2 x
tensor=2), then on one, it trains as an uninterrupted run does.

train.py runs in subprocesses, each with its own number of simulated CPU devices. The global
batch is the config's (rows are multiples of data.batch_multiple whatever the mesh), the data
position is one per process, and Orbax restores the parameters and Adam's moments into the new
mesh's shardings: each step sees the same rows and starts from the same state.

Tolerance: rtol 1e-4, atol 1e-5 on the per-step loss (about 3.5 here). A batch or a parameter
split over other devices is summed in another order, which changes the last float32 bits: the
uninterrupted 1-device and 8-device runs, with no resume at all, differ by up to 2.5e-6 in
these steps, and so does the resumed run. A resume that loses anything is far outside it:
with the data position lost the losses after it move by up to 0.1, with Adam's moments and count
zeroed by up to 0.2; without the new mesh's shardings the checkpoint does not restore at all.
About 40 s on 2 cores with the compilation cache warm.
"""

import json
import pathlib

import numpy as np
import pytest

from configs import tiny
from tests.train_runs import train_once
from transformer_jax.runs.checkpoints import local_data_state
from transformer_jax.runs.layout import CheckpointError
from transformer_jax.training.loop import validate_train_config
from transformer_jax.training.validation import check_batch_split, fit_batch_multiple

STEPS = 6
# No decoding; the saves to resume from are those of each part's last step.
QUIET = [
    f"--config.eval_every={STEPS}",
    f"--config.checkpoint_every={STEPS}",
    "--config.eval_bleu_sentences=0",
    "--config.test_sentences=0",
]
FSDP2_TENSOR2 = ["--config.mesh.data=1", "--config.mesh.fsdp=2", "--config.mesh.tensor=2"]
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def _train(workdir: pathlib.Path, devices: int, steps: int = STEPS, mesh=()) -> str:
    """train.py on the tiny config up to `steps` on `devices` devices; returns its stderr."""
    steps_flag = f"--config.num_train_steps={steps}"
    train_once(workdir, "configs/tiny.py", steps_flag, *QUIET, *mesh, devices=devices)
    return (workdir / "train.stderr").read_text()


def _train_losses(workdir: pathlib.Path) -> dict[int, float]:
    rows = map(json.loads, (workdir / "metrics.jsonl").read_text().splitlines())
    return {r["step"]: r["loss"] for r in rows if r["split"] == "train"}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[int, float]:
    workdir = tmp_path_factory.mktemp("uninterrupted_8")
    _train(workdir, devices=8)
    return _train_losses(workdir)


def test_resumes_on_4_then_1_device_as_if_uninterrupted(tmp_path, uninterrupted):
    assert "mesh {'data': 8, 'fsdp': 1, 'tensor': 1}, 8 devices" in _train(tmp_path, 8, 2)
    log = _train(tmp_path, 4, 4, FSDP2_TENSOR2)
    assert "mesh {'data': 1, 'fsdp': 2, 'tensor': 2}, 4 devices" in log
    assert f"resumed from {tmp_path}/checkpoints at step 2" in log
    log = _train(tmp_path, 1)
    assert "mesh {'data': 1, 'fsdp': 1, 'tensor': 1}, 1 devices" in log
    assert f"resumed from {tmp_path}/checkpoints at step 4" in log

    resumed = _train_losses(tmp_path)
    assert sorted(resumed) == sorted(uninterrupted) == list(range(1, STEPS + 1))
    steps = sorted(uninterrupted)
    assert [resumed[s] for s in (1, 2)] == [uninterrupted[s] for s in (1, 2)]  # Same mesh.
    np.testing.assert_allclose(
        [resumed[s] for s in steps], [uninterrupted[s] for s in steps], **TOLERANCE
    )
    difference = max(abs(resumed[s] - uninterrupted[s]) for s in steps)
    print(f"largest loss difference after the resumes: {difference:.2g}")


def test_uninterrupted_runs_on_8_and_1_device_differ_by_the_same_noise(tmp_path, uninterrupted):
    """The tolerance above holds between two runs that never resume: it is the noise of
    another reduction order, not room left for a resume's error."""
    _train(tmp_path, devices=1)
    one = _train_losses(tmp_path)
    steps = sorted(uninterrupted)
    np.testing.assert_allclose(
        [one[s] for s in steps], [uninterrupted[s] for s in steps], **TOLERANCE
    )
    difference = max(abs(one[s] - uninterrupted[s]) for s in steps)
    print(f"largest loss difference, 1 device against 8, no resume: {difference:.2g}")


@pytest.mark.parametrize(
    "batch_multiple, mesh, ways",
    [
        (4, {"data": -1}, 8),
        (4, {"data": 1, "fsdp": 8}, 8),
        (2, {"data": 2, "fsdp": 2, "tensor": 2}, 4),
    ],
)
def test_a_mesh_that_cannot_split_the_batch_is_refused_naming_the_fields(
    batch_multiple, mesh, ways
):
    """Global rows are multiples of data.batch_multiple, fixed by the config: a mesh whose
    batch axes (data x fsdp) do not divide it is refused before anything runs."""
    config = tiny.get_config()
    config.data.batch_multiple = batch_multiple
    config.mesh.update(mesh)
    with pytest.raises(ValueError) as error:
        validate_train_config(config)
    message = str(error.value)
    assert f"config.mesh {dict(config.mesh)} on 8 devices splits every batch {ways} ways" in message
    assert f"config.data.batch_multiple={batch_multiple}" in message


@pytest.mark.parametrize(
    "batch_multiple, mesh", [(4, {"data": 2, "fsdp": 2, "tensor": 2}), (2, {"tensor": 4})]
)
def test_a_mesh_whose_batch_axes_divide_the_batch_is_accepted(batch_multiple, mesh):
    config = tiny.get_config()
    config.data.batch_multiple = batch_multiple
    config.mesh.update(mesh)
    validate_train_config(config)


@pytest.mark.parametrize(
    "batch_multiple, mesh, devices, fitted",
    [
        (8, {"data": -1}, 8, 8),  # the shipped multiple on up to 8 devices: as before
        (8, {"data": 2, "fsdp": 2, "tensor": 2}, 8, 8),
        (8, {"data": -1}, 32, 32),  # a 32-chip slice: multiples of 32, no override
        (8, {"data": -1, "fsdp": 4}, 24, 24),
        (6, {"data": -1, "tensor": 2}, 8, 12),
        (8, {"data": 1, "tensor": -1}, 16, 8),  # other devices on tensor: as before
    ],
)
def test_a_new_run_fits_the_batch_multiple_to_the_mesh(batch_multiple, mesh, devices, fitted):
    """A new run's rows are multiples of lcm(batch_multiple, data x fsdp): any slice runs,
    and a mesh whose batch axes divide the multiple keeps the config's batches."""
    config = tiny.get_config()
    config.data.batch_multiple = batch_multiple
    config.mesh.update(mesh)
    fit = fit_batch_multiple(config, devices)
    assert fit.data.batch_multiple == fitted
    assert config.data.batch_multiple == batch_multiple  # the caller's config is left alone
    check_batch_split(fit, devices)


def test_a_resumed_run_keeps_the_batches_it_started_with():
    """config.json's multiple wins over a new fit: a run started on 32 chips (32) resumes on
    8 devices with its batches; one started on 8 (8) on 16 devices is refused, naming both."""
    config = tiny.get_config()
    assert fit_batch_multiple(config, 8, recorded=32).data.batch_multiple == 32
    kept = fit_batch_multiple(config, 16, recorded=8)
    assert kept.data.batch_multiple == 8
    with pytest.raises(ValueError, match="splits every batch 16 ways.*batch_multiple=8"):
        check_batch_split(kept, 16)
    # A config.json that the config's own multiple does not divide: fitted afresh (the data
    # position's fingerprint then refuses a checkpoint of other batches).
    config.data.batch_multiple = 16
    assert fit_batch_multiple(config, 8, recorded=8).data.batch_multiple == 16


def test_a_checkpoint_of_another_process_count_is_refused_naming_both():
    """Each process reads its own shard of the data, so its position cannot move to another
    number of processes: the error says which numbers and what to do."""
    with pytest.raises(CheckpointError, match="written by 2 processes and this run has 1"):
        local_data_state({"per_process": [{"epoch": 0}, {"epoch": 0}]})
