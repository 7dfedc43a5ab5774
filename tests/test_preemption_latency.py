"""benchmarks/preemption_latency.py's record: one row per set of train.py arguments."""

import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location(
        "preemption_latency", ROOT / "benchmarks" / "preemption_latency.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_rerun_replaces_its_row_and_keeps_the_others(tmp_path):
    record, out = _module().record, tmp_path / "latency.json"
    record(out, {"train_args": [], "seconds": 2.3, "saved_step": 65})
    record(out, {"train_args": ["--config.log_every=1000"], "seconds": 2.5, "saved_step": 67})
    record(out, {"train_args": [], "seconds": 2.1, "saved_step": 64})
    rows = json.loads(out.read_text())["rows"]
    assert [(r["train_args"], r["seconds"]) for r in rows] == [
        (["--config.log_every=1000"], 2.5), ([], 2.1)]  # fmt: skip
    assert all(r["date"] and r["machine"]["cores"] and r["jax"] for r in rows)
