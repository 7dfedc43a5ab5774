"""The language model end to end: train.py on configs/gpt_tiny.py (the stdlib corpus), exact
resumption, the corpus manifest, evaluate and generate CLIs on the run, and config guards."""

import json
import pathlib
import re
import sys

import pytest

from configs import gpt_tiny
from tests.train_runs import run_train_py
from transformer_jax.cli import evaluate, generate
from transformer_jax.training.loop import validate_train_config

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _rows(workdir, split):
    lines = (pathlib.Path(workdir) / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def test_the_run_learns_and_reports_bits_per_byte(tiny_lm_workdir):
    train = _rows(tiny_lm_workdir, "train")
    assert [r["step"] for r in train] == list(range(1, 21))
    assert train[-1]["loss"] < train[0]["loss"] - 1.0
    (test,) = _rows(tiny_lm_workdir, "test")
    assert 0 < test["bits_per_byte"] < 8.5 and test["perplexity"] > 1
    assert test["bits_per_byte"] == pytest.approx(test["bits_per_token"])  # byte tokens
    stderr = (tiny_lm_workdir / "train.stderr").read_text()
    assert "test documents" in stderr and "bits/byte" in stderr and "sample:" in stderr
    corpus = json.loads((tiny_lm_workdir / "corpus.json").read_text())
    assert corpus["source"] == "stdlib" and len(corpus["sha256"]) == 64
    assert corpus["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert min(corpus[s]["documents"] for s in ("train", "eval", "test")) > 0


def test_a_restart_reproduces_the_losses_exactly(tiny_lm_workdir, tmp_path):
    cmd = ["--config=configs/gpt_tiny.py", f"--workdir={tmp_path}"]  # one device, as the fixture
    first = run_train_py(
        [*cmd, "--config.num_train_steps=10", "--config.eval_every=10", "--config.samples=0"]
    )
    assert first.returncode == 0, first.stderr[-2000:]
    second = run_train_py(cmd)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "resumed from" in second.stderr
    losses = {r["step"]: r["loss"] for r in _rows(tmp_path, "train")}
    assert losses == {r["step"]: r["loss"] for r in _rows(tiny_lm_workdir, "train")}


def test_evaluate_cli_scores_a_language_model_workdir(tiny_lm_workdir, capsys):
    assert evaluate.main([f"--workdir={tiny_lm_workdir}", "--split=eval"]) == 0
    out = capsys.readouterr().out
    assert "bits per byte" in out and "this model" in out and "lzma -9e" in out
    record = json.loads((tiny_lm_workdir / "eval" / "eval.step20.lm.json").read_text())
    assert record["bits_per_byte"] > record["lzma_bits_per_byte"] * 0.1
    assert {"zlib_bits_per_byte", "bigram_bits_per_byte", "perplexity"} <= set(record)


def test_generate_cli_streams_and_reads_stdin(tiny_lm_workdir, capsys, monkeypatch):
    args = [f"--workdir={tiny_lm_workdir}", "--max_new_tokens=8", "--temperature=0"]
    assert generate.main([*args, "--prompt=The module"]) == 0
    streamed = capsys.readouterr().out
    assert streamed.startswith("The module") and streamed.endswith("\n")
    monkeypatch.setattr("sys.stdin", _Stdin("The module\n\nclass\n"))
    assert generate.main(args) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 4 and lines[-1] == ""  # one line per prompt
    assert "The module" + generate_unescape(lines[0]) == streamed[:-1]


def test_generate_cli_errors_are_one_line(tiny_lm_workdir, tiny_workdir, tmp_path, capsys):
    assert generate.main([f"--workdir={tiny_workdir}", "--prompt=x"]) == 1
    assert "needs a 'decoder_only' language model" in capsys.readouterr().err
    assert generate.main([f"--workdir={tmp_path / 'missing'}", "--prompt=x"]) == 1
    assert capsys.readouterr().err.startswith("error: ")
    assert generate.main([f"--workdir={tiny_lm_workdir}", "--top_p=0", "--prompt=x"]) == 1
    assert "top_p" in capsys.readouterr().err


def test_config_guards_name_the_field():
    config = gpt_tiny.get_config()
    validate_train_config(config)
    config.data.max_len = 128
    with pytest.raises(ValueError, match="data.max_len=128 exceeds"):
        validate_train_config(config)
    config = gpt_tiny.get_config()
    config.model.name = "encoder_decoder"
    with pytest.raises(ValueError, match="trains the 'decoder_only' model"):
        validate_train_config(config)


class _Stdin:
    def __init__(self, text):
        self.buffer = _Buffer(text.encode())


class _Buffer:
    def __init__(self, data):
        self._data = data

    def read(self):
        return self._data


def generate_unescape(line: str) -> str:
    table = {"n": "\n", "r": "\r", "\\": "\\"}
    return re.sub(r"\\(.)", lambda m: table[m.group(1)], line)
