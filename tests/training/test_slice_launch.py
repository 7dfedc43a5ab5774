"""The multi-host launch recipe of docs/tpu.md, run on one CPU: its `train.py` command as 2
processes x 4 simulated devices (gloo between them, as JAX processes on the workers of a slice),
with a `gs://` workdir on the local Cloud Storage emulator; a second launch resumes.

The command is read from the page, so the recipe and the test cannot drift apart. A TPU VM
finds its peers by itself; on a CPU the test adds --coordinator_address, --num_processes and
--process_id, a tiny config for the page's, and settings that keep the run short.
"""

import json
import pathlib
import re
import shlex
import socket
import subprocess
import sys
import uuid

import pytest
from etils import epath

from tests.gcs_emulator import gcs_bucket, list_objects  # noqa: F401 (fixture)
from tests.train_runs import subprocess_env

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


def _launch(args: list[str], steps: int) -> list[str]:
    """Starts train.py with `args` as 2 processes of 4 CPU devices; returns their stderr."""
    port = _free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "train.py",
                *args,
                f"--coordinator_address=localhost:{port}",
                "--num_processes=2",
                f"--process_id={i}",
                f"--config.num_train_steps={steps}",
                "--config.checkpoint_every=2",
                "--config.eval_every=100",
                "--config.eval_bleu_sentences=0",  # the eval loss only: no decoding to compile
                "--config.test_sentences=0",
            ],
            cwd=ROOT,
            env=subprocess_env(devices=4),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(e[-3000:] for e in errs)
    return errs


@pytest.mark.slow
def test_the_slice_recipe_trains_on_gs_and_a_second_launch_resumes(gcs_bucket):  # noqa: F811
    args = recipe_train_args()
    assert "--multi_process" in args
    assert not [a for a in args if "batch" in a], "a slice of any size needs no batch field"
    workdir = f"{gcs_bucket}/runs/{uuid.uuid4().hex[:8]}"
    swap = {"--config": "--config=configs/tiny.py", "--workdir": f"--workdir={workdir}"}
    # The tiny config's corpus is embedded: the page's TFDS data directory does not apply.
    args = [swap.get(a.split("=")[0], a) for a in args if "tfds_data_dir" not in a]
    assert f"--workdir={workdir}" in args and "--config=configs/tiny.py" in args

    _launch(args, steps=2)
    objects = [o.removeprefix(f"{workdir}/") for o in list_objects(workdir)]
    assert any(o.startswith("checkpoints/2/") for o in objects), objects
    assert not any(o.startswith("checkpoints/4/") for o in objects)
    config = json.loads(epath.Path(f"{workdir}/config.json").read_text())
    assert config["data"]["batch_multiple"] == 8  # 8 devices split the shipped multiple

    errs = _launch(args, steps=4)
    assert f"resumed from {workdir}/checkpoints at step 2" in errs[0]
    rows = [json.loads(x) for x in epath.Path(f"{workdir}/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2, 3, 4]
    assert any(o.startswith(f"{workdir}/checkpoints/4/") for o in list_objects(workdir))
