"""A `gs://` workdir end to end, against a local Cloud Storage emulator (tests/gcs_emulator.py).

train.py writes everything (config.json, model.json, tokenizer, caches, metrics, TensorBoard
events, Orbax checkpoints through TensorStore) to the bucket and nothing locally, resumes from
it, and `Translator` and the plot read it back.
"""

import json
import pathlib
import subprocess
import uuid

import pytest
from etils import epath

from tests.gcs_emulator import gcs_bucket, list_objects  # noqa: F401 (fixture)
from tests.train_runs import run_train_py
from transformer_jax import Classifier, Generator, MaskFiller, Translator
from transformer_jax.plotting import plot_curves, read_metrics

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _train(workdir: str, cwd: pathlib.Path, steps: int) -> subprocess.CompletedProcess:
    cmd = [
        f"--config={ROOT / 'configs' / 'tiny.py'}",
        f"--workdir={workdir}",
        f"--config.num_train_steps={steps}",
        "--config.checkpoint_every=2",
        "--config.eval_every=4",
        "--config.eval_bleu_sentences=4",
        "--config.test_sentences=0",
    ]
    proc = run_train_py(cmd, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow(seconds=50)
def test_train_resume_translate_and_plot_on_gs(gcs_bucket, tmp_path):  # noqa: F811
    workdir = f"{gcs_bucket}/runs/{uuid.uuid4().hex[:8]}"
    _train(workdir, tmp_path, steps=4)
    assert list(tmp_path.iterdir()) == []  # no local folder named "gs:", nothing local at all
    objects = [o.removeprefix(f"{workdir}/") for o in list_objects(workdir)]
    for name in ("config.json", "model.json", "tokenizer.model", "metrics.jsonl"):
        assert name in objects, objects
    assert any(o.startswith("checkpoints/4/state/") for o in objects)
    assert any(o.startswith("best/4/") for o in objects)  # best by validation BLEU
    assert any(o.startswith("tensorboard/events.out.tfevents") for o in objects)
    assert any(o.startswith("cache/") for o in objects)

    rerun = _train(workdir, tmp_path, steps=6)
    assert f"resumed from {workdir}/checkpoints at step 4" in rerun.stderr
    rows = [json.loads(x) for x in epath.Path(f"{workdir}/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"] == [1, 2, 3, 4, 5, 6]

    translator = Translator.from_checkpoint(workdir)
    assert translator.steps == (6,)
    (out,) = translator.translate(["twenty-one"], beam_size=2)
    assert isinstance(out, str)
    assert [r["step"] for r in read_metrics(workdir)["eval"]] == [4, 6]
    png = plot_curves(workdir)
    assert str(png) == f"{workdir}/curves.png" and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow(seconds=30)
def test_language_model_on_gs(gcs_bucket, tmp_path):  # noqa: F811
    workdir = f"{gcs_bucket}/runs/{uuid.uuid4().hex[:8]}"
    cmd = [
        f"--config={ROOT / 'configs' / 'gpt_tiny.py'}",
        f"--workdir={workdir}",
        "--config.num_train_steps=4",
        "--config.eval_every=4",
        "--config.checkpoint_every=2",
    ]
    proc = run_train_py(cmd, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []  # nothing local
    objects = [o.removeprefix(f"{workdir}/") for o in list_objects(workdir)]
    assert "corpus.json" in objects and any(o.startswith("cache/stdlib_docs-py") for o in objects)
    assert any(o.startswith("checkpoints/4/state/") for o in objects)
    assert any(o.startswith("best/4/") for o in objects)  # best by validation bits per byte
    generator = Generator.from_checkpoint(workdir)
    assert generator.steps == (4,)
    assert len(generator.generate(["The module"], 5, temperature=0)) == 1


@pytest.mark.slow(seconds=50)
def test_bert_pretrain_then_fine_tune_from_gs(gcs_bucket, tmp_path):  # noqa: F811
    pretrained = f"{gcs_bucket}/runs/{uuid.uuid4().hex[:8]}"
    tuned = f"{gcs_bucket}/runs/{uuid.uuid4().hex[:8]}"
    for config, workdir, extra in (
        ("bert_tiny.py", pretrained, []),
        ("bert_classify_tiny.py", tuned, [f"--config.init_from={pretrained}"]),
    ):
        cmd = [
            f"--config={ROOT / 'configs' / config}",
            f"--workdir={workdir}",
            "--config.num_train_steps=2",
            "--config.eval_every=2",
            "--config.checkpoint_every=2",
            *extra,
        ]
        proc = run_train_py(cmd, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(tmp_path.iterdir()) == []  # nothing local
    assert f"initialised from {pretrained} step 2" in proc.stderr
    objects = [o.removeprefix(f"{tuned}/") for o in list_objects(tuned)]
    assert {"labels.json", "tokenizer.model"} <= set(objects)
    (guesses,) = MaskFiller.from_checkpoint(pretrained).fill_mask("a [MASK] b", top_k=2)
    assert len(guesses) == 2
    prediction = Classifier.from_checkpoint(tuned).predict(("one", "un"))
    assert prediction.label in ("not_translation", "translation")
