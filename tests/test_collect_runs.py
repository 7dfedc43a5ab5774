"""benchmarks/collect_runs.py: what each finished run changed against a config, and what it
measured, in one results file."""

import json

import pytest

from benchmarks import collect_runs


def test_runs_are_collected_with_their_changes(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    fields = collect_runs.base_fields("configs/tiny.py")
    ran = {"num_train_steps": 7, "model": {"d_model": 8}}  # and no other field: all "missing"
    (run / "config.json").write_text(json.dumps(ran))
    rows = [{"step": 7, "split": "eval", "bleu": 1.0}, {"step": 7, "split": "test", "bleu": 2.0}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.json"
    collect_runs.main(["--config=configs/tiny.py", f"--out={out}", f"short={run}"])
    record = json.loads(out.read_text())["runs"]["short"]
    assert record["changed"]["num_train_steps"] == 7 and record["changed"]["model.d_model"] == 8
    assert record["changed"]["seed"] is None and len(record["changed"]) == len(fields)
    assert record["test"]["bleu"] == 2.0 and record["eval"]["7"]["bleu"] == 1.0
    (run / "metrics.jsonl").write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(SystemExit, match="no test record"):
        collect_runs.main(["--config=configs/tiny.py", f"--out={out}", f"short={run}"])
