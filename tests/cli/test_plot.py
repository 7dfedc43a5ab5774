"""The curve plot of a workdir (`python -m transformer_jax.plot`)."""

import json

import pytest

from transformer_jax.cli.plot import main, read_metrics


def test_plot_writes_png_and_keeps_last_row_per_step(tmp_path):
    rows = [
        {"step": 1, "split": "train", "loss": 3.0},
        {"step": 2, "split": "train", "loss": 2.0},
        {"step": 2, "split": "train", "loss": 1.5},  # replayed after a restart
        {"step": 2, "split": "eval", "loss": 1.8, "bleu": 12.0, "exact_match": 0.1},
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    metrics = read_metrics(tmp_path)
    assert [r["loss"] for r in metrics["train"]] == [3.0, 1.5]
    assert main([f"--workdir={tmp_path}"]) == 0
    png = (tmp_path / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_plot_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        read_metrics(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "split": "train"}\nnot json\n')
    with pytest.raises(ValueError, match="metrics.jsonl:2"):
        read_metrics(tmp_path)


def test_plot_command_errors_are_one_line(tmp_path, capsys):
    assert main([f"--workdir={tmp_path}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "metrics.jsonl does not exist" in err
    assert err.count("\n") == 1
