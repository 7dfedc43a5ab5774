"""The curve plot of a workdir (`python -m transformer_jax plot`)."""

import json

import pytest

from transformer_jax.cli.plot import main
from transformer_jax.runs import read_metrics


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


@pytest.mark.parametrize(
    "row, ylabel, labels",
    [
        ({"bleu": 30.0, "chrf": 55.0, "exact_match": 0.25}, "score (0-100)",
         ["BLEU", "chrF", "exact match %"]),
        ({"accuracy": 0.9, "macro_f1": 0.85, "top5_accuracy": 0.99}, "score (0-100)",
         ["accuracy %", "macro-F1 %"]),
        ({"mlm_accuracy": 0.3, "nsp_accuracy": 0.7}, "score (0-100)",
         ["masked-LM accuracy %", "next-sentence accuracy %"]),
        ({"bits_per_byte": 2.2, "bits_per_token": 6.1, "perplexity": 60.0},
         "bits (lower is better)", ["bits per byte", "bits per token"]),
        ({"perplexity": 60.0}, "", []),
    ],
)  # fmt: skip
def test_every_task_gets_its_own_validation_scores(row, ylabel, labels):
    from transformer_jax.plotting import validation_series

    evals = [{"step": 10, "split": "eval", "loss": 1.0, **row}]
    got_label, series = validation_series(evals)
    assert got_label == ylabel and [s[0] for s in series] == labels
    if "accuracy" in row:
        assert series[0][1:] == ([10], [90.0])


def test_the_loss_axis_says_when_labels_are_smoothed(tmp_path):
    from transformer_jax.plotting import loss_label

    assert loss_label(tmp_path) == "loss"  # no config.json
    (tmp_path / "config.json").write_text(json.dumps({"label_smoothing": 0.1}))
    assert loss_label(tmp_path) == "loss (label smoothing 0.1)"
    (tmp_path / "config.json").write_text(json.dumps({"label_smoothing": 0.0}))
    assert loss_label(tmp_path) == "loss"


def test_a_language_model_run_plots(tmp_path):
    rows = [
        {"step": 1, "split": "train", "loss": 5.0},
        {"step": 2, "split": "eval", "loss": 4.0, "nll": 4.0, "bits_per_byte": 2.5},
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main([f"--workdir={tmp_path}", f"--output={tmp_path / 'lm.png'}"]) == 0
    assert (tmp_path / "lm.png").read_bytes()[:4] == b"\x89PNG"
