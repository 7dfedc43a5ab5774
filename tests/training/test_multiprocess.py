"""Two JAX processes on localhost (CPU collectives over gloo) take the same steps as one process.

train.py --multi_process end to end, preempted on one process and resumed: test_slice_launch.py.
"""

import json
import pathlib
import socket

import pytest

from tests.train_runs import PyProcess, subprocess_env

WORKER = pathlib.Path(__file__).parent / "helpers" / "multiprocess_step.py"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(num_processes, tmp_path):
    port = _free_port()
    outs = [tmp_path / f"p{num_processes}_{i}.json" for i in range(num_processes)]
    procs = [
        PyProcess(WORKER, [i, num_processes, port, out], subprocess_env(devices=4))
        for i, out in enumerate(outs)
    ]
    for p in procs:
        out, err = p.communicate(timeout=400)
        assert p.returncode == 0, (out + err)[-3000:]
    return [json.loads(o.read_text()) for o in outs]


@pytest.mark.slow(seconds=150)
def test_two_processes_match_one(tmp_path):
    (single,) = _launch(1, tmp_path)
    multi = _launch(2, tmp_path)
    assert single["devices"] == 4 and single["process_count"] == 1
    for result in multi:
        assert result["devices"] == 8 and result["process_count"] == 2
        assert result["losses"] == pytest.approx(single["losses"], rel=1e-5)
        assert result["checksum"] == pytest.approx(single["checksum"], rel=1e-5)
    assert multi[0]["losses"] == multi[1]["losses"]
