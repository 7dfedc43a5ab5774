"""The main job end to end: train.py on the tiny config, resumption, preemption, guards."""

import json
import os
import pathlib
import random
import shutil
import signal
import time

import ml_collections
import pytest
import tensorflow_datasets as tfds

from configs import tiny
from tests.train_runs import TrainPy, run_train_py, trained_once
from transformer_jax.inference.translator import Translator
from transformer_jax.runs.layout import Workdir
from transformer_jax.tasks import TranslationTask
from transformer_jax.training import train_and_evaluate
from transformer_jax.training.config_guard import check_or_write_config

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAST = [  # no BLEU decoding: these tests are about the loop and its checkpoints
    "--config.num_train_steps=24",
    "--config.eval_every=24",
    "--config.eval_bleu_sentences=0",
    "--config.test_sentences=0",
    "--config.checkpoint_every=4",
]


def _args(workdir, *extra):
    """train.py's arguments for the tiny config in `workdir`."""
    return ["--config=configs/tiny.py", f"--workdir={workdir}", *extra]


def _run(workdir, *extra, check=True):
    proc = run_train_py(_args(workdir, *extra))
    if check and proc.returncode:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc


def _train_losses(workdir) -> dict[int, float]:
    """Per-step training loss; a step logged twice (replayed after a kill) keeps its last value."""
    losses = {}
    path = pathlib.Path(workdir) / "metrics.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        if row["split"] == "train":
            losses[row["step"]] = row["loss"]
    return losses


def _start(workdir):
    """train.py on the tiny config in the background, stderr captured."""
    return TrainPy(_args(workdir, *FAST))


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


@pytest.fixture(scope="session")
def uninterrupted_run(tmp_path_factory) -> pathlib.Path:
    """The FAST run without interruption (checkpoints every 4 steps to 24), trained once per
    session however many xdist workers ask; each caller gets its own copy."""
    return trained_once(tmp_path_factory, "uninterrupted", lambda w: _run(w, *FAST))


@pytest.fixture(scope="session")
def uninterrupted(uninterrupted_run) -> dict[int, float]:
    return _train_losses(uninterrupted_run)


def test_tiny_run_learns(uninterrupted):
    assert sorted(uninterrupted) == list(range(1, 25))
    first, last = uninterrupted[1], uninterrupted[24]
    assert last < first - 0.5, (first, last)


def test_sigterm_saves_and_rerun_resumes(tmp_path, uninterrupted):
    proc = _start(tmp_path)
    _wait_for_step(tmp_path, 6, proc)
    proc.send_signal(signal.SIGTERM)
    signalled = time.time()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    # The loop runs at most one step ahead: the exit waits for one step and the save.
    assert time.time() - signalled < 30
    assert "preempted: saved step" in err
    saved = int(err.split("preempted: saved step ")[1].split(";")[0])
    steps = sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit())
    assert steps[-1] == saved  # the final save happened, not only the periodic ones
    rerun = _run(tmp_path, *FAST)
    assert f"resumed from {tmp_path}/checkpoints at step {saved}" in rerun.stderr
    assert _train_losses(tmp_path) == uninterrupted


def _finished_saves(workdir) -> list[int]:
    path = pathlib.Path(workdir) / "checkpoints"
    return sorted(int(p.name) for p in path.iterdir() if p.name.isdigit()) if path.exists() else []


def _unfinished_saves(workdir) -> set[str]:
    path = pathlib.Path(workdir) / "checkpoints"
    return {p.name for p in path.iterdir() if "tmp" in p.name} if path.exists() else set()


def _kill_during_a_save(workdir, proc, timeout=300) -> bool:
    """SIGKILL at the next checkpoint write: True when it landed mid-write (the asynchronous
    save's temporary directory was there), False when the save had just finished."""
    folder = pathlib.Path(workdir) / "checkpoints"
    finished, unfinished = set(_finished_saves(workdir)), _unfinished_saves(workdir)
    deadline = time.time() + timeout
    while time.time() < deadline:
        names = set(os.listdir(folder)) if folder.exists() else set()
        if {n for n in names if "tmp" in n} - unfinished:
            proc.kill()
            return True
        if {int(n) for n in names if n.isdigit()} - finished:
            proc.kill()
            return False
        if proc.poll() is not None:
            raise AssertionError(f"train.py ended early:\n{proc.stderr.read()[-3000:]}")
    raise AssertionError(f"no checkpoint write seen in {timeout}s")


def _wait_for_new_step(workdir, step, proc, lines_before, timeout=300):
    """Waits until this run (not an earlier one) logs training step `step`."""
    path = pathlib.Path(workdir) / "metrics.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"train.py ended early:\n{proc.stderr.read()[-3000:]}")
        lines = path.read_text().splitlines()[lines_before:] if path.exists() else []
        rows = [json.loads(x) for x in lines if x.endswith("}")]
        if any(r["split"] == "train" and r["step"] >= step for r in rows):
            return
        time.sleep(0.01)
    raise AssertionError(f"step {step} not reached in {timeout}s")


@pytest.mark.slow(seconds=60)
def test_kill_loop_loses_nothing(tmp_path, uninterrupted):
    """SIGKILL at each kind of moment, restarting after each: a random step of the first run
    (before or after its first save), the next checkpoint write of a resumed run (mid-write, or
    just after it), a random step of a resumed run, a write again; then more writes, while the
    run has saves left, until one has landed mid-write (3 in 5 do). The losses equal the
    uninterrupted run's, each restart resumes from the newest finished save, no checkpoint is
    ever found damaged, at least one kill lands mid-write, and every checkpoint left restores."""
    rng = random.Random(14)
    metrics = pathlib.Path(tmp_path) / "metrics.jsonl"
    killed_at, resumed_from, mid_write = [], [], 0
    kill = 0
    # Past the 4th kill, only while no kill has landed mid-write and a save is left: step 24.
    while kill < 4 or (not mid_write and max(_finished_saves(tmp_path), default=0) < 24):
        lines_before = len(metrics.read_text().splitlines()) if metrics.exists() else 0
        saved = max(_finished_saves(tmp_path), default=0)
        proc = _start(tmp_path)
        try:
            if kill % 2 or kill >= 4:
                mid_write += _kill_during_a_save(tmp_path, proc)
            else:
                _wait_for_new_step(tmp_path, saved + rng.randint(1, 5), proc, lines_before)
        finally:
            proc.kill()
            _, err = proc.communicate()
        if kill:
            assert "does not restore" not in err, err[-3000:]  # No damaged checkpoint.
            resumed = int(err.split(" at step ")[1].split()[0]) if "resumed from" in err else 0
            resumed_from.append(resumed)
        latest = max(_train_losses(tmp_path), default=0)
        killed_at.append((latest, max(_finished_saves(tmp_path), default=0)))
        kill += 1
    final = _run(tmp_path, *FAST)
    assert "does not restore" not in final.stderr
    resumed_from.append(int(final.stderr.split(" at step ")[1].split()[0]))
    # Each restart resumed from the newest save finished when it was killed: the steps lost
    # are exactly those since that save.
    assert resumed_from == [saved for _, saved in killed_at], (killed_at, resumed_from)
    lost = [step - saved for step, saved in killed_at]
    assert all(n <= 4 + 1 for n in lost), lost  # checkpoint_every=4, plus the step in flight
    assert mid_write >= 1  # At least one kill landed during an asynchronous write.
    assert _train_losses(tmp_path) == uninterrupted
    for step in _finished_saves(tmp_path):  # Every checkpoint left on disk restores.
        Translator.from_checkpoint(tmp_path, step=step)
    damaged = pathlib.Path(tmp_path) / "damaged" / "checkpoints"
    unfinished = [p.name for p in damaged.iterdir()] if damaged.exists() else []
    assert all("tmp" in name for name in unfinished), unfinished
    print(f"kills {len(killed_at)} ({mid_write} mid-write), steps lost {lost}, unfinished "
          f"saves set aside {len(unfinished)}, damaged checkpoints 0")  # fmt: skip


def test_damaged_latest_checkpoint_resumes_from_the_newest_intact_one(
    tmp_path, uninterrupted_run, uninterrupted
):
    shutil.copytree(uninterrupted_run, tmp_path, dirs_exist_ok=True)  # The FAST run, finished.
    latest = tmp_path / "checkpoints" / "24"
    for victim in (p for p in (latest / "state").rglob("*") if p.is_file()):  # Truncated.
        victim.write_bytes(victim.read_bytes()[: os.path.getsize(victim) // 3])
    rerun = _run(tmp_path, *FAST)
    assert f"checkpoint {latest} does not restore" in rerun.stderr
    assert f"resumed from {tmp_path}/checkpoints at step 20" in rerun.stderr
    assert (tmp_path / "damaged" / "checkpoints" / "24").is_dir()
    assert _train_losses(tmp_path) == uninterrupted


def test_sigterm_during_the_setup_exits_cleanly_with_nothing_lost(tmp_path):
    proc = _start(tmp_path)
    while not (tmp_path / "config.json").exists():  # The run has started its setup.
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert "preempted before step 1; rerun the same command to resume." in err
    assert "Traceback" not in err


def test_conflicting_workdir_is_refused(tmp_path):
    fields = TranslationTask.model_defining_data_fields
    check_or_write_config(Workdir.at(tmp_path), tiny.get_config(), fields)  # As a run does.
    proc = _run(tmp_path, "--config.model.d_model=64", "--config.data.vocab_size=300", check=False)
    assert proc.returncode != 0
    assert "model.d_model: 32 -> 64" in proc.stderr
    assert "data.vocab_size: 200 -> 300" in proc.stderr
    assert "step 1" not in proc.stderr  # Refused before training.
    config = tiny.get_config()
    config.num_train_steps = 50  # schedule changes are allowed
    check_or_write_config(Workdir.at(tmp_path), config, fields)
    config.model.scan_layers, config.model.remat = True, "full"  # and how the model runs
    config.model.attention_kernel = "xla"
    check_or_write_config(Workdir.at(tmp_path), config, fields)
    config.model.d_ff = 96
    with pytest.raises(ValueError, match="model.d_ff: 64 -> 96"):
        check_or_write_config(Workdir.at(tmp_path), config, fields)


@pytest.mark.parametrize(
    "override, message",
    [
        ("--config.model.d_modle=64", "d_modle"),
        ("--config.num_train_steps=many", "num_train_steps"),
        ("--config.test_beam_size=0", "config.test_beam_size"),
        ("--config.test_alpha=-1", "config.test_alpha must be a finite number >= 0"),
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
        config.test_beam_size = 2  # The final test decodes with a beam.
    with tfds.testing.mock_data(num_examples=48):
        result = train_and_evaluate(config, str(tmp_path))
    assert result["step"] == 6
    for key in ("loss", "accuracy", "perplexity", "bleu", "chrf", "exact_match"):
        assert key in result
    assert 0.0 <= result["test"]["bleu"] <= 100.0
    assert result["test"]["beam_size"] == 2 and result["test"]["sentences"] == 8
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
