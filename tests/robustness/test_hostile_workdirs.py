"""Workdirs edited by hand or put together from other runs: loading them for inference (the
Python API and the CLIs) and resuming training on them fail with `CheckpointError` (or, from a
CLI, one `error:` line) naming the file and what to do, never a raw Orbax/SentencePiece/JSON
traceback.

Each case copies a session run (without its caches) and damages one file.
"""

from __future__ import annotations

import json
import random
import re
import shutil

import pytest

from configs import tiny
from tests.robustness.hostile import run_cli
from transformer_jax.cli import evaluate, translate
from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.fill_mask import MaskFiller
from transformer_jax.inference.generator import Generator
from transformer_jax.inference.translator import Translator
from transformer_jax.runs.layout import CheckpointError
from transformer_jax.training import train_and_evaluate

# A restore that fails on a damaged file leaves Orbax coroutines that are never awaited; Python
# reports them when they are garbage-collected (in this process only: a CLI exits cleanly).
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

LOADERS = {  # run -> (its fixture, its loader)
    "translation": ("tiny_workdir", Translator.from_checkpoint),
    "language_model": ("tiny_lm_workdir", Generator.from_checkpoint),
    "bert": ("tiny_bert_workdir", MaskFiller.from_checkpoint),
    "classifier": ("tiny_classifier", Classifier.from_checkpoint),
}


def copy_run(request, tmp_path, run: str):
    source = request.getfixturevalue(LOADERS[run][0])
    target = tmp_path / "run"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("cache", "tensorboard", "eval"))
    return target


def edit_json(path, change) -> None:
    fields = json.loads(path.read_text())
    change(fields)
    path.write_text(json.dumps(fields))


def set_model(**fields):
    return lambda d: (d["model"] if "model" in d else d).update(fields)


RANDOM = random.Random(0).randbytes(256)
CASES = {  # (file, how it is damaged) -> what the error must say
    ("config.json", b"{not json"): "config.json is not readable JSON",
    ("config.json", b""): "config.json is not readable JSON",
    ("config.json", b"[1, 2]"): "config.json has no `model` section",
    ("config.json", b'{"model": "caf\xe9"}'): "config.json is not readable JSON",
    ("config.json", set_model(name="gpt9")): "'gpt9'",
    ("model.json", b"\x00\x01garbage"): "model.json is not readable JSON",
    ("model.json", set_model(name="gpt9")): "'gpt9' is not a registered model",
    ("model.json", set_model(d_model="wide")): "config.model.d_model must be an integer",
    ("model.json", set_model(dropout_rate=None)): "['dropout_rate'] are missing or null",
    ("model.json", set_model(colour="red")): "fields ['colour'] that model",
    ("model.json", set_model(d_model=64)): "incompatible parameter shapes",  # another width
    ("tokenizer.model", RANDOM): "not a SentencePiece model",
    ("tokenizer.model", b""): "the file is empty, not a SentencePiece model",
    ("tokenizer.model", b"one two three\n"): "not a SentencePiece model",
}


def damage(workdir, file: str, how) -> None:
    if callable(how):
        edit_json(workdir / file, how)
    else:
        (workdir / file).write_bytes(how)


@pytest.mark.parametrize(
    ("run", "file", "how"),
    [
        pytest.param(run, file, how, id=f"{run}-{file}-{i}")
        for run in LOADERS
        for i, (file, how) in enumerate(CASES)
        if not (run == "language_model" and file == "tokenizer.model")  # Byte tokens: none.
    ],
)
def test_damaged_files_are_named_by_every_loader(request, tmp_path, run, file, how):
    workdir = copy_run(request, tmp_path, run)
    damage(workdir, file, how)
    with pytest.raises(CheckpointError) as error:
        LOADERS[run][1](workdir)
    message = str(error.value)
    named = "checkpoints" if "shapes" in CASES[file, how] else file
    assert named in message and CASES[file, how] in message, message


def test_a_checkpoint_of_another_model_is_refused_naming_it(request, tmp_path):
    workdir = copy_run(request, tmp_path, "translation")
    shutil.rmtree(workdir / "checkpoints")
    shutil.copytree(
        request.getfixturevalue("tiny_lm_workdir") / "checkpoints", workdir / "checkpoints"
    )
    with pytest.raises(
        CheckpointError, match=r"checkpoints/\d+/state: the checkpoint does not fit"
    ):
        Translator.from_checkpoint(workdir)


def test_labels_json_that_is_not_a_list_of_names_is_refused(request, tmp_path):
    workdir = copy_run(request, tmp_path, "classifier")
    for labels in ('{"label_names": "ab", "pair": true}', '{"label_names": ["a", "a"], "pair": 1}',
                   "[]", "{"):  # fmt: skip
        (workdir / "labels.json").write_text(labels)
        with pytest.raises(CheckpointError, match="labels.json: missing or unreadable"):
            Classifier.from_checkpoint(workdir)


@pytest.mark.parametrize("main", [translate.main, evaluate.main])
@pytest.mark.parametrize(
    ("file", "how"),
    [
        ("config.json", b"{"),
        ("tokenizer.model", b"\x80\x04"),
        ("model.json", set_model(num_heads=3)),
    ],
    ids=["config", "tokenizer", "model"],
)
def test_cli_errors_are_one_line_naming_the_file(request, tmp_path, main, file, how):
    workdir = copy_run(request, tmp_path, "translation")
    damage(workdir, file, how)
    code, out, err = run_cli(main, [f"--workdir={workdir}", "--beam_size=1"], b"nine\n")
    assert code == 1 and out == b""
    assert err.startswith(f"error: {workdir / file}: ") and err.count("\n") == 1, err


# ------------------------------------------------------------------------------ resuming training
def resume(workdir):
    """train.py's call on the tiny workdir (the config the fixture trained, one more step)."""
    config = tiny.get_config()
    config.num_train_steps = 31
    return train_and_evaluate(config, str(workdir))


@pytest.mark.parametrize(
    ("file", "how", "message"),
    [
        ("tokenizer.model", RANDOM, "tokenizer.model: not a SentencePiece model"),
        ("tokenizer.model", b"", "tokenizer.model: the file is empty"),
        ("tokenizer.json", b"\x80\x04garbage", "tokenizer.json: not the JSON object"),
        ("tokenizer.json", b"[]", "tokenizer.json: not the JSON object"),
    ],
    ids=["random-model", "empty-model", "binary-settings", "list-settings"],
)
def test_resuming_names_a_damaged_tokenizer_file(request, tmp_path, file, how, message):
    workdir = copy_run(request, tmp_path, "translation")
    (workdir / file).write_bytes(how)
    with pytest.raises(ValueError, match=re.escape(message)):
        resume(workdir)
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["10", "20", "30"]


def test_resuming_names_a_config_json_that_is_not_json(request, tmp_path):
    workdir = copy_run(request, tmp_path, "translation")
    (workdir / "config.json").write_bytes(b"{half a config")
    with pytest.raises(CheckpointError, match="config.json is not readable JSON"):
        resume(workdir)


def test_resuming_on_checkpoints_of_another_model_is_refused(request, tmp_path):
    workdir = copy_run(request, tmp_path, "translation")
    shutil.rmtree(workdir / "checkpoints")
    shutil.copytree(
        request.getfixturevalue("tiny_lm_workdir") / "checkpoints", workdir / "checkpoints"
    )
    with pytest.raises(CheckpointError) as error:
        resume(workdir)
    assert str(workdir / "checkpoints") in str(error.value)
