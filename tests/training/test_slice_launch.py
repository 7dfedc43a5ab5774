"""The multi-host launch recipe of docs/tpu.md, run on one CPU: its `train.py` command as 2
processes x 4 simulated devices (gloo between them, as JAX processes on the workers of a slice),
with a `gs://` workdir on the local Cloud Storage emulator: one host is preempted, and the same
command again resumes.

The command is read from the page, so the recipe and the test cannot drift apart. A TPU VM
finds its peers by itself; on a CPU the test adds --coordinator_address, --num_processes and
--process_id, a tiny config for the page's, and settings that keep the run short.
"""

import json
import pathlib
import re
import shlex
import signal
import socket
import time
import uuid

import pytest
from etils import epath

from tests.gcs_emulator import gcs_bucket, list_objects  # noqa: F401 (fixture)
from tests.train_runs import TrainPy, subprocess_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTION = "## A slice over several hosts"


def recipe_train_args() -> list[str]:
    """The arguments after `train.py` in the `--worker=all` command of docs/tpu.md's
    multi-host section (the part of its --command="..." that runs train.py)."""
    page = (ROOT / "docs" / "tpu.md").read_text()
    section = page[page.index(SECTION) :].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    (line,) = [x for x in block.replace("\\\n", " ").splitlines() if "train.py" in x]
    (remote,) = [a.split("=", 1)[1] for a in shlex.split(line) if a.startswith("--command=")]
    (train,) = [part.split() for part in remote.split("&&") if "train.py" in part]
    assert train[0] == "~/venv/bin/python", "the recipe runs the workers' virtual environment"
    return train[train.index("train.py") + 1 :]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(args: list[str], steps: int, *extra: str) -> list[TrainPy]:
    """Starts train.py with `args` as 2 processes of 4 CPU devices."""
    port = _free_port()
    return [
        TrainPy(
            [
                *args,
                f"--coordinator_address=localhost:{port}",
                "--num_processes=2",
                f"--process_id={i}",
                f"--config.num_train_steps={steps}",
                "--config.checkpoint_every=100",  # the preemption's save only
                f"--config.eval_every={steps}",
                *extra,
            ],
            subprocess_env(devices=4),
        )
        for i in range(2)
    ]


def _finish(procs: list[TrainPy]) -> list[str]:
    """Waits for every process; their stderr. Each must exit 0."""
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], _report(errs)
    return errs


def _report(errs: list[str]) -> str:
    """Each process's first Python traceback (a process that raised first and then aborted in
    JAX's shutdown barrier shows only the abort in its tail) and the tail of its stderr."""
    parts = []
    for i, err in enumerate(errs):
        start = err.find("Traceback (most recent call last)")
        first = err[start : start + 4000] if start >= 0 else "(no Python traceback)"
        parts.append(f"--- process {i}: first traceback\n{first}")
        parts.append(f"--- process {i}: tail\n{err[-2000:]}")
    return "\n".join(parts)


@pytest.mark.slow(seconds=100)
def test_the_slice_recipe_is_preempted_on_one_host_and_resumes_on_gs(gcs_bucket):  # noqa: F811
    """The recipe's train.py on 2 processes: SIGTERM reaches process 1 only (a preempted
    host); both agree on one step (JAX's preemption sync point), save it once to the bucket and
    exit 0. The same command again resumes there, each process at its own place in its data
    shard, and finishes with evaluation and test through the cross-host data exchange."""
    args = recipe_train_args()
    assert "--multi_process" in args
    assert not [a for a in args if "batch" in a], "a slice of any size needs no batch field"
    workdir = f"{gcs_bucket}/runs/{uuid.uuid4().hex[:8]}"
    swap = {"--config": "--config=configs/tiny.py", "--workdir": f"--workdir={workdir}"}
    # The tiny config's corpus is embedded: the page's TFDS data directory does not apply.
    args = [swap.get(a.split("=")[0], a) for a in args if "tfds_data_dir" not in a]
    assert f"--workdir={workdir}" in args and "--config=configs/tiny.py" in args
    steps, metrics = 12, epath.Path(f"{workdir}/metrics.jsonl")

    procs = _launch(args, steps)
    deadline = time.monotonic() + 300
    while not (metrics.exists() and '"step": 2,' in metrics.read_text()):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.2)
    procs[1].send_signal(signal.SIGTERM)
    errs = _finish(procs)
    saved = int(errs[0].split("preempted: saved step ")[1].split(";")[0])
    assert saved < steps
    objects = [o.removeprefix(f"{workdir}/") for o in list_objects(workdir)]
    checkpoints = {o.split("/")[1] for o in objects if o.startswith("checkpoints/")}
    assert checkpoints == {str(saved)}, checkpoints
    config = json.loads(epath.Path(f"{workdir}/config.json").read_text())
    assert config["data"]["batch_multiple"] == 8  # 8 devices split the shipped multiple

    eval_args = ("--config.eval_bleu_sentences=8", "--config.test_sentences=8")
    errs = _finish(_launch(args, steps, *eval_args))
    assert f"resumed from {workdir}/checkpoints at step {saved}" in errs[0]
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"] == list(range(1, steps + 1))
    assert {r["split"] for r in rows} == {"train", "eval", "test"}
