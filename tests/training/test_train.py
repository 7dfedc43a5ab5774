"""The main job end to end: train.py on the tiny config, resumption, preemption, guards."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import ml_collections
import pytest
import tensorflow_datasets as tfds

from configs import tiny
from transformer_jax.tasks import TranslationTask
from transformer_jax.training import train_and_evaluate
from transformer_jax.training.checkpointing import check_or_write_config
from transformer_jax.workdir import Workdir

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAST = [  # no BLEU decoding: these tests are about the loop and its checkpoints
    "--config.num_train_steps=24",
    "--config.eval_every=24",
    "--config.eval_bleu_sentences=0",
    "--config.test_sentences=0",
    "--config.checkpoint_every=4",
]


def _cmd(workdir, *extra):
    return [
        sys.executable,
        str(ROOT / "train.py"),
        "--config=configs/tiny.py",
        f"--workdir={workdir}",
        *extra,
    ]


def _run(workdir, *extra, check=True):
    proc = subprocess.run(
        _cmd(workdir, *extra), cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    if check and proc.returncode:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def _train_losses(workdir) -> dict[int, float]:
    """Per-step training loss; a step logged twice (replayed after a kill) keeps its last value."""
    losses = {}
    for line in (pathlib.Path(workdir) / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["split"] == "train":
            losses[row["step"]] = row["loss"]
    return losses


def _start(workdir):
    """train.py on the tiny config in the background, stderr captured."""
    return subprocess.Popen(
        _cmd(workdir, *FAST), cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )


def _wait_for_step(workdir, step, proc, timeout=300):
    path = pathlib.Path(workdir) / "metrics.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"train.py ended early:\n{proc.stderr.read()[-3000:]}")
        if path.exists() and _train_losses(workdir) and max(_train_losses(workdir)) >= step:
            return
        time.sleep(0.2)
    raise AssertionError(f"step {step} not reached in {timeout}s")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("uninterrupted")
    _run(workdir, *FAST)
    return _train_losses(workdir)


def test_tiny_run_learns(uninterrupted):
    assert sorted(uninterrupted) == list(range(1, 25))
    first, last = uninterrupted[1], uninterrupted[24]
    assert last < first - 0.5, (first, last)


def test_sigkill_then_restart_reproduces_losses_exactly(tmp_path, uninterrupted):
    proc = _start(tmp_path)
    try:
        _wait_for_step(tmp_path, 11, proc)  # checkpoints at 4, 8; killed past 11
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    restarted = _run(tmp_path, *FAST)
    assert "resumed from" in restarted.stderr
    assert _train_losses(tmp_path) == uninterrupted  # exact: same data order, same keys


def test_sigterm_saves_and_rerun_resumes(tmp_path, uninterrupted):
    proc = _start(tmp_path)
    _wait_for_step(tmp_path, 6, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert "preempted: saved step" in err
    saved = int(err.split("preempted: saved step ")[1].split(";")[0])
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[-1] == saved  # the final save happened, not only the periodic ones
    rerun = _run(tmp_path, *FAST)
    assert f"resumed from {tmp_path}/checkpoints at step {saved}" in rerun.stderr
    assert _train_losses(tmp_path) == uninterrupted


def test_conflicting_workdir_is_refused(tmp_path):
    _run(
        tmp_path,
        "--config.num_train_steps=2",
        "--config.eval_every=2",
        "--config.eval_bleu_sentences=0",
        "--config.test_sentences=0",
    )
    proc = _run(tmp_path, "--config.model.d_model=64", "--config.data.vocab_size=300", check=False)
    assert proc.returncode != 0
    assert "model.d_model: 32 -> 64" in proc.stderr
    assert "data.vocab_size: 200 -> 300" in proc.stderr
    config = tiny.get_config()
    config.num_train_steps = 50  # schedule changes are allowed
    check_or_write_config(Workdir.at(tmp_path), config, TranslationTask.model_defining_data_fields)


@pytest.mark.parametrize(
    "override, message",
    [
        ("--config.model.d_modle=64", "d_modle"),
        ("--config.num_train_steps=many", "num_train_steps"),
    ],
)
def test_bad_override_names_the_field(tmp_path, override, message):
    proc = _run(tmp_path, override, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr


def test_end_to_end_on_tfds_mock_data(tmp_path):
    """train_and_evaluate on TFDS's wmt14 through mock_data: train, evaluate, BLEU, test."""
    config = tiny.get_config()
    with config.unlocked():
        config.data.source = "tfds"
        config.data.tfds_name = "wmt14_translate/de-en"
        config.data.source_lang, config.data.target_lang = "en", "de"
        config.data.max_len = 64
        config.data.tokens_per_batch = 1024
        config.num_train_steps = 6
        config.eval_every = 6
        config.checkpoint_every = 3
        config.eval_bleu_sentences = 8
        config.test_sentences = 8
    with tfds.testing.mock_data(num_examples=48):
        result = train_and_evaluate(config, str(tmp_path))
    assert result["step"] == 6
    for key in ("loss", "accuracy", "perplexity", "bleu", "chrf", "exact_match"):
        assert key in result
    assert 0.0 <= result["test"]["bleu"] <= 100.0
    assert "nrefs:1|case:mixed" in result["test"]["bleu_signature"]
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert {r["split"] for r in rows} == {"train", "eval", "test"}
    assert (tmp_path / "tokenizer.model").exists() and (tmp_path / "config.json").exists()
    assert any((tmp_path / "tensorboard").iterdir())
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()) == [
        "3",
        "6",
    ]
    assert [p.name for p in (tmp_path / "best").iterdir() if p.name.isdigit()] == ["6"]


def test_config_is_python_with_comments():
    config = tiny.get_config()
    assert isinstance(config, ml_collections.ConfigDict)
    source = pathlib.Path(ROOT / "configs" / "common.py").read_text()
    for line in source.splitlines():
        if line.strip().startswith("c.") and "=" in line and "ConfigDict()" not in line:
            assert "#" in line, f"config field without a comment: {line.strip()}"
    assert os.path.exists(ROOT / "configs" / "default.py")


def test_config_without_task_or_model_name_is_refused_with_the_fix(tmp_path):
    config = tiny.get_config()
    del config.model["name"]
    with pytest.raises(ValueError, match=r"config.task and config.model.name must name"):
        train_and_evaluate(config, str(tmp_path))
    config = tiny.get_config()
    config.task = "summarization"
    with pytest.raises(
        ValueError,
        match=r"'summarization' is not a known task; known: \['bert_pretrain', 'classify', "
        r"'image_classify', 'lang",
    ):
        train_and_evaluate(config, str(tmp_path))
    assert not (tmp_path / "config.json").exists()  # refused before anything is written
