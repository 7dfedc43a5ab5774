"""BERT pretraining end to end: train.py on configs/bert_tiny.py logs and tests both objectives,
fill-mask CLI round trip and its bad inputs, and the config guards (issue 11). The loss itself:
tests/tasks/test_bert_pretrain_loss.py."""

import io
import json
import pathlib
import sys

import pytest

from configs import bert_tiny
from tests.train_runs import train_once
from transformer_jax.cli import evaluate, fill_mask
from transformer_jax.inference.fill_mask import MaskFiller
from transformer_jax.runs.layout import CheckpointError, Workdir
from transformer_jax.tasks.bert_pretrain import BertPretrainTask
from transformer_jax.training.loop import validate_train_config


def _rows(workdir, split):
    lines = (pathlib.Path(workdir) / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def test_the_tiny_run_logs_and_tests_both_objectives(tiny_bert_workdir):
    train = _rows(tiny_bert_workdir, "train")
    assert [r["step"] for r in train] == list(range(1, 21))
    assert train[-1]["mlm_loss"] < train[0]["mlm_loss"] - 0.5
    (ev,) = _rows(tiny_bert_workdir, "eval")
    assert {"mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss"} <= set(ev)
    (test,) = _rows(tiny_bert_workdir, "test")
    assert 0 <= test["mlm_baseline_accuracy"] <= 1 and test["pairs"] > 0
    stderr = (tiny_bert_workdir / "train.stderr").read_text()
    assert "most frequent token" in stderr and "next sentence: accuracy" in stderr
    assert (tiny_bert_workdir / "best").is_dir()


def test_fill_mask_cli_round_trip_and_bad_inputs(tiny_bert_workdir, capsys, monkeypatch):
    stdin = "The [MASK] function returns a list.\n[MASK] and [MASK]\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    assert fill_mask.main([f"--workdir={tiny_bert_workdir}", "--top_k=3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and len(lines[0].split(", ")) == 3
    assert len(lines[1].split(" | ")) == 2  # one group per mask
    assert fill_mask.main([f"--workdir={tiny_bert_workdir}", "--json", "--text=a [MASK]"]) == 0
    (guesses,) = json.loads(capsys.readouterr().out)
    probabilities = [g["probability"] for g in guesses]
    assert len(guesses) == 5 and probabilities == sorted(probabilities, reverse=True)
    assert all(g["text"].startswith("a ") for g in guesses)
    assert fill_mask.main([f"--workdir={tiny_bert_workdir}", "--text=no mask here"]) == 1
    assert "has no [MASK]" in capsys.readouterr().err
    assert fill_mask.main([f"--workdir={tiny_bert_workdir / 'nope'}", "--text=[MASK]"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_fill_mask_truncates_with_a_warning_and_refuses_other_runs(
    tiny_bert_workdir, tiny_lm_workdir
):
    filler = MaskFiller.from_checkpoint(tiny_bert_workdir)
    long = "The [MASK] " + "word " * 200
    with pytest.warns(UserWarning, match="truncated"):
        (masks,) = filler.fill_mask([long], top_k=2)
    assert len(masks) == 1
    with pytest.raises(ValueError, match=r"texts\[0\] has every \[MASK\] beyond the model"):
        filler.fill_mask("word " * 200 + "[MASK]")  # Refused before the model runs.
    with pytest.raises(CheckpointError, match="encoder_only"):
        MaskFiller.from_checkpoint(tiny_lm_workdir)


@pytest.mark.parametrize(
    "override, message",
    [
        (lambda c: c.model.update(name="decoder_only"), "'encoder_only' model"),
        (lambda c: c.data.update(max_len=128), "exceeds the model's learned positions"),
        (lambda c: c.data.update(tokenizer="byte"), "BERT needs"),
    ],
)
def test_config_guards(override, message):
    config = bert_tiny.get_config()
    override(config)
    with pytest.raises(ValueError, match=message):
        validate_train_config(config)


def test_evaluate_cli_scores_a_pretraining_workdir(tiny_bert_workdir, capsys):
    assert evaluate.main([f"--workdir={tiny_bert_workdir}", "--split=eval"]) == 0
    assert "masked LM: accuracy" in capsys.readouterr().out
    (path,) = (tiny_bert_workdir / "eval").glob("eval.step*.bert.json")
    assert 0 <= json.loads(path.read_text())["mlm_accuracy"] <= 1


def test_init_from_continues_a_pretraining_run_with_its_tokenizer(tiny_bert_workdir, tmp_path):
    """Domain-adaptive pretraining: a new run starts from every parameter of the tiny run (its
    first masked-LM loss is the trained model's, not a random one's) and keeps its tokenizer."""
    run = train_once(
        tmp_path, "configs/bert_tiny.py", f"--config.init_from={tiny_bert_workdir}",
        "--config.num_train_steps=2", "--config.eval_every=2", "--config.checkpoint_every=2",
    )  # fmt: skip
    assert "parameter arrays copied, 0 new" in (run / "train.stderr").read_text()
    assert (run / "tokenizer.model").read_bytes() == (
        tiny_bert_workdir / "tokenizer.model"
    ).read_bytes()
    first, trained = _rows(run, "train")[0], _rows(tiny_bert_workdir, "train")
    assert first["mlm_loss"] < trained[0]["mlm_loss"] - 0.5


def test_continuing_a_run_refuses_a_tokenizer_trained_on_numbers(tmp_path):
    cfg = bert_tiny.get_config()
    cfg.init_from, cfg.data.mix_numbers, cfg.data.mix_numbers_in_tokenizer = str(tmp_path), 10, True
    with pytest.raises(ValueError, match="mix_numbers_in_tokenizer=True, but config.init_from"):
        BertPretrainTask(cfg, Workdir.at(tmp_path / "run"))
