"""The translate and evaluate command lines on the tiny trained run."""

import json
import pathlib
import re
import subprocess
import sys

import pytest

from tests.train_runs import subprocess_env
from transformer_jax.cli import common, evaluate, translate
from transformer_jax.data import translation as data_lib
from transformer_jax.inference.translator import Translator

ROOT = pathlib.Path(__file__).resolve().parents[2]
LINES = ["three hundred and four", "", "nine", "one thousand and twelve", "", "seventy-one"]


@pytest.fixture(scope="module")
def expected(tiny_workdir):
    """What the Python API gives for LINES, greedy, latest checkpoint."""
    return Translator.from_checkpoint(tiny_workdir).translate(LINES, beam_size=1)


def test_split_lines_keeps_empty_lines():
    assert common.split_lines("a\n\nb\n") == ["a", "", "b"]
    assert common.split_lines("a\r\n\r\nb") == ["a", "", "b"]
    assert common.split_lines("\n\n") == ["", ""]
    assert common.split_lines("a\u2028b\n") == ["a\u2028b"]  # only "\n" ends a line
    assert common.split_lines("") == []


def test_stdin_to_stdout(tiny_workdir, expected):
    proc = subprocess.run(
        [sys.executable, "-m", "transformer_jax", "translate", f"--workdir={tiny_workdir}"]
        + ["--beam_size=1"],
        input="\n".join(LINES) + "\n",
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n") == expected + [""]  # one line per input, then the final "\n"
    assert "Traceback" not in proc.stderr


def test_file_to_file(tiny_workdir, tmp_path, expected, capsys):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("\r\n".join(LINES))  # CRLF and no final newline
    argv = [f"--workdir={tiny_workdir}", f"--input={src}", f"--output={out}", "--beam_size=1"]
    assert translate.main(argv) == 0
    assert out.read_text().split("\n") == expected + [""]
    assert out.read_text().count("\n") == len(LINES)
    assert capsys.readouterr().out == ""  # translations went to the file


def test_beam_and_averaging_flags(tiny_workdir, tmp_path):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("\n".join(LINES) + "\n")
    argv = [f"--workdir={tiny_workdir}", f"--input={src}", f"--output={out}"]
    assert translate.main([*argv, "--beam_size=2", "--average_last=2", "--step=20"]) == 0
    model = Translator.from_checkpoint(tiny_workdir, step=20, average_last=2)
    assert out.read_text().split("\n")[:-1] == model.translate(LINES, beam_size=2)


def test_evaluate_prints_scores_and_writes_hypotheses(tiny_workdir, capsys):
    argv = [f"--workdir={tiny_workdir}", "--split=test", "--max_sentences=8", "--beam_size=1"]
    assert evaluate.main(argv) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^step 30, 8 test sentences \(\d+ s\), greedy: BLEU ", printed, re.M)
    assert "BLEU " in printed and "nrefs:1|case:mixed|eff:no|tok:13a" in printed
    assert "chrF " in printed and "exact match " in printed

    hyp_path = tiny_workdir / "eval" / "test.step30.first8.beam1.txt"
    assert f"hypotheses: {hyp_path}" in printed
    hyps = hyp_path.read_text().split("\n")[:-1]
    pairs = data_lib.get_pairs(Translator.from_checkpoint(tiny_workdir).config.data, "test")
    sources = [src for src, _ in pairs[:8]]
    assert hyps == Translator.from_checkpoint(tiny_workdir).translate(sources, beam_size=1)
    assert f"figures: {hyp_path.with_suffix('.json')}" in printed
    record = json.loads(hyp_path.with_suffix(".json").read_text())
    assert record["sentences"] == 8 and record["steps"] == [30]
    assert 0.0 <= record["bleu"] <= 100.0 and 0.0 <= record["exact_match"] <= 1.0
    assert record["bleu_signature"].startswith("nrefs:1|case:mixed")


def test_evaluate_names_averaged_runs(tiny_workdir, capsys):
    argv = [f"--workdir={tiny_workdir}", "--max_sentences=4", "--average_last=3"]
    assert evaluate.main([*argv, "--beam_size=2"]) == 0
    assert "step 30 (average of steps [10, 20, 30])" in capsys.readouterr().out
    assert (tiny_workdir / "eval" / "test.step30.avg3.first4.beam2.txt").exists()
    assert evaluate.main([*argv, "--beam_size=2", "--alpha=1.0"]) == 0  # Its own record.
    assert (tiny_workdir / "eval" / "test.step30.avg3.first4.beam2.alpha1.json").exists()


@pytest.mark.parametrize("main", [translate.main, evaluate.main])
def test_cli_errors_are_one_line(main, tmp_path, capsys):
    assert main([f"--workdir={tmp_path / 'missing'}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing: workdir does not exist" in err
    assert "Traceback" not in err


def test_cli_reports_missing_step(tiny_workdir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("nine\n")
    assert translate.main([f"--workdir={tiny_workdir}", f"--input={src}", "--step=5"]) == 1
    assert "step 5 does not exist; the saved steps are [10, 20, 30]" in capsys.readouterr().err
