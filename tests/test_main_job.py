"""benchmarks/main_job.py: a finished run is read back; the record has its provenance, each
seed's test record and the summary over the seeds."""

import json

import pytest

from benchmarks import main_job


def _finished(workdir, accuracy):
    workdir.mkdir(parents=True)
    rows = [{"step": 10, "split": "train", "loss": 1.0},
            {"step": 10, "split": "test", "accuracy": accuracy, "examples": 100}]  # fmt: skip
    (workdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_finished_runs_are_read_back_and_summarised(tmp_path, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    for seed, accuracy in ((0, 0.9), (1, 0.8)):
        _finished(tmp_path / "runs" / f"tiny-s{seed}", accuracy)
    out = tmp_path / "out.json"
    before = {"runs": [{"workdir": str(tmp_path / "runs" / "tiny-s0"), "seconds": 61.5}]}
    out.write_text(json.dumps(before))
    main_job.main([f"--root={tmp_path / 'runs'}", "--config=configs/tiny.py", "--seeds=0,1",
                   f"--out={out}", "--config.num_train_steps=10"])  # fmt: skip
    record = json.loads(out.read_text())
    assert record["config"] == "configs/tiny.py" and record["versions"]["jax"]
    assert record["machine"]["cores"] >= 1 and record["date"]
    assert [r["seconds"] for r in record["runs"]] == [61.5, None]  # the time recorded before
    command = record["runs"][1]["command"]
    assert command.endswith("--config.seed=1 --config.num_train_steps=10")
    assert command.startswith("XLA_FLAGS=--xla_force_host_platform_device_count=2 python train.py")
    assert record["summary"]["accuracy"] == pytest.approx({"mean": 0.85, "min": 0.8, "max": 0.9})
    assert record["summary"]["seconds"] == {"mean": 61.5, "min": 61.5, "max": 61.5}


def test_only_config_overrides_pass_through(tmp_path):
    with pytest.raises(SystemExit):
        main_job.main(["--config=configs/tiny.py", "--steps=3"])
