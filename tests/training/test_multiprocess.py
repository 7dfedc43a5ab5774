"""Two JAX processes on localhost (CPU collectives over gloo): the same steps as one process,
and train.py --multi_process end to end, preempted on one process and resumed."""

import json
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.train_runs import subprocess_env

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
        subprocess.Popen(
            [sys.executable, str(WORKER), str(i), str(num_processes), str(port), str(out)],
            cwd=ROOT,
            env=subprocess_env(devices=4),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i, out in enumerate(outs)
    ]
    for p in procs:
        log, _ = p.communicate(timeout=400)
        assert p.returncode == 0, log[-3000:]
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


def _train_processes(workdir, port, *overrides):
    """train.py --multi_process as 2 processes of 2 CPU devices each (gloo between them)."""
    env = subprocess_env(devices=2)
    return [
        subprocess.Popen(
            [
                sys.executable,
                "train.py",
                "--config=configs/tiny.py",
                f"--workdir={workdir}",
                "--multi_process",
                f"--coordinator_address=localhost:{port}",
                "--num_processes=2",
                f"--process_id={i}",
                "--config.num_train_steps=24",
                "--config.checkpoint_every=100",
                "--config.eval_every=24",
                "--config.eval_bleu_sentences=8",
                "--config.test_sentences=8",
                *overrides,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(2)
    ]


@pytest.mark.slow(seconds=60)
def test_sigterm_to_one_process_saves_the_same_step_everywhere_then_resumes(tmp_path):
    """Preemption of a 2-process train.py: SIGTERM reaches process 1 only; both processes agree
    on a step (JAX's preemption sync point), save it once, exit 0; the rerun resumes there and
    finishes with evaluation and test through the cross-host data exchange."""
    procs = _train_processes(tmp_path, _free_port())
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.time() + 400
    while not (metrics.exists() and '"step": 4,' in metrics.read_text()):
        assert time.time() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.2)
    procs[1].send_signal(signal.SIGTERM)
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], _report(errs)
    saved = int(errs[0].split("preempted: saved step ")[1].split(";")[0])
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [str(saved)]

    procs = _train_processes(tmp_path, _free_port())
    errs = [p.communicate(timeout=400)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], _report(errs)
    assert f"resumed from {tmp_path}/checkpoints at step {saved}" in errs[0]
    rows = [json.loads(x) for x in metrics.read_text().splitlines()]
    assert {r["split"] for r in rows} == {"train", "eval", "test"}
    assert max(r["step"] for r in rows) == 24
