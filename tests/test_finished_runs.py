"""Benchmarks read a finished run back only when it ran with the settings they ask for."""

import json

import ml_collections
import pytest

from benchmarks.finished_runs import last_test, train_or_read


def _finished(path, config: dict):
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    rows = [{"split": "train", "step": 5}, {"split": "test", "step": 5, "accuracy": 0.5},
            {"split": "test", "step": 9, "accuracy": 0.75}]  # fmt: skip
    (path / "metrics.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")


def test_a_finished_run_is_read_back_with_its_last_test_record(tmp_path):
    saved = {"num_train_steps": 9, "head_l2": 0.1, "data": {"max_len": 64}}
    _finished(tmp_path / "run", saved)
    config = ml_collections.ConfigDict(saved)
    test, seconds = train_or_read(config, tmp_path / "run", ("num_train_steps", "data.max_len"))
    assert test["accuracy"] == 0.75 and seconds is None
    assert last_test(tmp_path / "missing") is None


def test_a_run_with_other_settings_is_refused_by_name(tmp_path):
    _finished(tmp_path / "run", {"num_train_steps": 9, "data": {"max_len": 64}})
    config = ml_collections.ConfigDict({"num_train_steps": 9, "data": {"max_len": 128}})
    with pytest.raises(SystemExit, match=r"ran with data.max_len=64, but .* asks for 128"):
        train_or_read(config, tmp_path / "run", ("num_train_steps", "data.max_len"))
