"""One server over the tiny runs of every kind, shared by the serving tests of a worker."""

from __future__ import annotations

import pathlib

import pytest

from tests.serving.server_process import ServerProcess
from tests.train_runs import train_once, trained_once

# Small batches and two beam sizes: the warm-up compiles every shape in seconds.
SERVER_FLAGS = ("--max_batch=4", "--beam_sizes=1,2", "--max_queue=64", "--max_tokens=48")
NAMES = ("tiny", "gpt", "bert", "cls", "vit")


@pytest.fixture(scope="session")
def tiny_vit_workdir(tmp_path_factory) -> pathlib.Path:
    """configs/vit_tiny.py trained 10 steps (a checkpoint to serve, not a good model)."""
    return trained_once(tmp_path_factory, "tiny_vit_run", lambda w: train_once(
        w, "configs/vit_tiny.py", "--config.num_train_steps=10", "--config.checkpoint_every=10",
        "--config.eval_every=10"))  # fmt: skip


@pytest.fixture(scope="session")
def workdirs(tiny_workdir, tiny_lm_workdir, tiny_bert_workdir, tiny_classifier, tiny_vit_workdir):
    """The served runs by name."""
    runs = (tiny_workdir, tiny_lm_workdir, tiny_bert_workdir, tiny_classifier, tiny_vit_workdir)
    return dict(zip(NAMES, runs, strict=True))


@pytest.fixture(scope="session")
def server(workdirs):
    """A ready `transformer-jax serve` of every tiny run (one per xdist worker)."""
    args = [f"--workdir={w}" for w in workdirs.values()] + [f"--name={n}" for n in workdirs]
    with ServerProcess(*args, *SERVER_FLAGS) as proc:
        proc.wait_ready()
        yield proc
        assert proc.stop() == 0, proc.output()[-3000:]
