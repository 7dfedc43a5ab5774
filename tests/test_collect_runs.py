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
    started = (run / "config.json").stat().st_mtime  # The run's start.
    rows = [
        {"step": 5, "split": "train", "time": started + 30.0, "tokens_per_sec": 90.0},
        {"step": 6, "split": "train", "time": started + 35.0, "tokens_per_sec": 100.0},
        {"step": 7, "split": "train", "time": started + 40.0, "tokens_per_sec": 130.0},
        {"step": 7, "split": "eval", "time": started + 45.0, "bleu": 1.0},
        {"step": 7, "split": "test", "time": started + 50.0, "bleu": 2.0},
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "eval").mkdir()  # What `transformer-jax evaluate` wrote.
    (run / "eval" / "test.step7.beam1.json").write_text(json.dumps({"bleu": 3.0}))
    out = tmp_path / "out.json"
    (tmp_path / "corpus.json").write_text(json.dumps({"pairs": {"train": 3}}))
    attach = f"--attach=corpus={tmp_path / 'corpus.json'}"
    collect_runs.main(["--config=configs/tiny.py", f"--out={out}", attach, f"short={run}"])
    assert json.loads(out.read_text())["corpus"] == {"pairs": {"train": 3}}
    record = json.loads(out.read_text())["runs"]["short"]
    assert record["changed"]["num_train_steps"] == 7 and record["changed"]["model.d_model"] == 8
    assert record["changed"]["seed"] is None and len(record["changed"]) == len(fields)
    assert record["test"]["bleu"] == 2.0 and record["eval"]["7"]["bleu"] == 1.0
    assert record["train_seconds"] == 40.0 and record["seconds"] == 50.0
    assert record["per_sec"] == {"tokens_per_sec": 100.0}
    assert record["evaluations"] == {"test.step7.beam1": {"bleu": 3.0}}
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    with pytest.raises(SystemExit, match="no test record"):
        collect_runs.main(["--config=configs/tiny.py", f"--out={out}", f"short={run}"])
    with pytest.raises(SystemExit):  # argparse's error: the file to attach is missing.
        collect_runs.main(["--config=configs/tiny.py", f"--out={out}", "--attach=c=no.json", "x=y"])


def test_the_mean_of_seeds_is_recorded_for_their_test_and_shared_evaluations(tmp_path):
    names = []
    for seed, (test, score) in enumerate([(0.5, 0.6), (0.7, 0.9)]):
        run = tmp_path / f"s{seed}"
        (run / "eval").mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"seed": seed}))
        rows = [
            {"step": 3, "split": "train", "time": 1.0},
            {"step": 3, "split": "test", "time": 2.0, "accuracy": test, "note": "x"},
        ]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (run / "eval" / "test.step3.image.json").write_text(json.dumps({"accuracy": score}))
        (run / "eval" / f"only{seed}.json").write_text(json.dumps({"accuracy": 1.0}))
        names.append(f"s{seed}={run}")
    out = tmp_path / "out.json"
    collect_runs.main(["--config=configs/tiny.py", f"--out={out}", "--mean=both=s0,s1", *names])
    mean = json.loads(out.read_text())["means"]["both"]
    assert mean["runs"] == ["s0", "s1"] and mean["test"]["accuracy"] == pytest.approx(0.6)
    assert "note" not in mean["test"] and "step" in mean["test"]
    assert mean["evaluations"] == {"test.step3.image": {"accuracy": pytest.approx(0.75)}}
    with pytest.raises(SystemExit):  # argparse's error: a run that was not given.
        collect_runs.main(["--config=configs/tiny.py", f"--out={out}", "--mean=m=s0,s9", *names])
