"""`transformer-jax embed` on the converted sentence-transformers fixture: vectors as text, JSON or
.npy, a query's ranking, and the errors a user meets (a GPT workdir, flags that do not go
together)."""

import io
import json
import pathlib
import sys
import warnings

import numpy as np
import pytest

from transformer_jax import interop
from transformer_jax.cli import embed
from transformer_jax.inference.embedder import Embedder

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"
TEXTS = ["Hello world!", "The cat sat on the mat.", ""]
LINES = "".join(t + "\n" for t in TEXTS)  # stdin: an empty line is a text too


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("embed_cli")
    for name in ("bert_sentence", "gpt2"):
        interop.from_hf(FIXTURES / name, root / name)
    return root


@pytest.fixture(scope="module")
def expected(workdirs):
    return Embedder.from_checkpoint(workdirs / "bert_sentence").embed(TEXTS)


def run(argv, stdin: str, monkeypatch, capsys) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = embed.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_one_vector_per_line_as_text_and_json(workdirs, expected, monkeypatch, capsys):
    workdir = f"--workdir={workdirs / 'bert_sentence'}"
    code, out, err = run([workdir], LINES, monkeypatch, capsys)
    assert code == 0, err
    rows = [[float(x) for x in line.split(" ")] for line in out.splitlines()]
    # Each number reads back as the very float32 the embedder computed.
    np.testing.assert_array_equal(np.asarray(rows, np.float32), expected)
    code, out, err = run([workdir, "--json", "--batch_size=2"], LINES, monkeypatch,
                         capsys)  # fmt: skip
    assert code == 0, err
    # Batches of 2 are other programs than one of 32: the last bits may differ.
    np.testing.assert_allclose([json.loads(x) for x in out.splitlines()], expected, atol=1e-6)


def test_out_writes_a_npy_array(workdirs, expected, tmp_path, monkeypatch, capsys):
    path = tmp_path / "vectors.npy"
    argv = [f"--workdir={workdirs / 'bert_sentence'}", f"--out={path}"] + [
        f"--text={t}" for t in TEXTS
    ]
    code, out, err = run(argv, "", monkeypatch, capsys)
    assert code == 0, err
    assert out == f"{path}: 3 embeddings of dimension 12, float32 (mean pooling, L2-normalised)\n"
    np.testing.assert_array_equal(np.load(path), expected)


def test_query_ranks_the_lines(workdirs, expected, monkeypatch, capsys):
    workdir = f"--workdir={workdirs / 'bert_sentence'}"
    code, out, err = run([workdir, "--query=Hello world!", "--json"], LINES,
                         monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    ranked = [json.loads(line) for line in out.splitlines()]
    scores = expected @ expected[0]
    assert [r["index"] for r in ranked] == np.argsort(-scores, kind="stable").tolist()
    assert ranked[0] == {"index": 0, "score": 1.0, "text": "Hello world!"}
    code, out, err = run([workdir, "--query=Hello world!", "--top_k=1"], LINES,
                         monkeypatch, capsys)  # fmt: skip
    assert (code, out) == (0, "1.0000\tHello world!\n"), err


def test_cls_pooling_flag(workdirs, monkeypatch, capsys):
    workdir = workdirs / "bert_sentence"
    code, out, err = run([f"--workdir={workdir}", "--pooling=cls", "--text=Hello world!"], "",
                         monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    cls = Embedder.from_checkpoint(workdir, pooling="cls").embed(["Hello world!"])
    np.testing.assert_array_equal(np.asarray([out.split(" ")], np.float32), cls)


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--out=v.npy", "--json"],
            "--out writes the embeddings to a file; it goes without --json",
        ),
        (["--out=v.npy", "--query=x"], "it goes without --query"),
        (["--out=vectors.txt"], "--out=vectors.txt: give a file name ending in .npy"),
        (["--top_k=2"], "--top_k goes with --query"),
        (["--batch_size=0"], "--batch_size must be >= 1, got 0"),
    ],
)
def test_flags_that_do_not_go_together(workdirs, flags, message, monkeypatch, capsys):
    code, _, err = run([f"--workdir={workdirs / 'bert_sentence'}", *flags], "a\n", monkeypatch,
                       capsys)  # fmt: skip
    assert code == 1 and err.startswith("error: ") and message in err, err
    assert err.count("\n") == 1


def test_workdirs_that_are_not_encoders(workdirs, tmp_path, monkeypatch, capsys):
    code, _, err = run([f"--workdir={workdirs / 'gpt2'}", "--text=a"], "", monkeypatch, capsys)
    assert code == 1 and err.startswith(
        f"error: {workdirs / 'gpt2' / 'config.json'}: the run "
        "is a 'language_model' task with a 'decoder_only' model"
    )
    assert "embed needs an 'encoder_only' model" in err and err.count("\n") == 1
    code, _, err = run([f"--workdir={tmp_path / 'none'}"], "", monkeypatch, capsys)
    assert code == 1 and "workdir does not exist" in err
    folder = FIXTURES / "bert_sentence"  # The Hugging Face folder itself, not converted.
    code, _, err = run([f"--workdir={folder}", "--text=a"], "", monkeypatch, capsys)
    assert code == 1 and "a Hugging Face model's (model_type 'bert')" in err, err
    assert f"`transformer-jax convert --from_hf={folder} --workdir=NEW`" in err
    code, _, err = run([f"--workdir={tmp_path}", "--pooling=max"], "", monkeypatch, capsys)
    assert code == 2 and "--pooling=max: value should be one of <mean|cls>" in err
