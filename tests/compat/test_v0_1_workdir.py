"""A workdir written by transformer_jax 0.1 (before the nn/models/tasks layout) still works.

`tests/fixtures/workdir_v0_1` was written by commit eb512e3 (`python train.py
--config=configs/tiny.py --config.num_train_steps=12 --config.keep_checkpoints=1 ...`): a
config.json without `task` or `model.name`, no model.json, and a checkpoint at step 12.
"""

import json
import pathlib
import shutil

import pytest

from tests.train_runs import run_train_py
from transformer_jax import Translator
from transformer_jax.runs.layout import Workdir, migrate

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "workdir_v0_1"


@pytest.fixture
def old_workdir(tmp_path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(FIXTURE, tmp_path / "run"))


def test_fixture_is_a_0_1_workdir():
    config = json.loads((FIXTURE / "config.json").read_text())
    assert "task" not in config and "name" not in config["model"]
    assert not (FIXTURE / "model.json").exists()
    assert (FIXTURE / "checkpoints" / "12" / "state").is_dir()


def test_migrate_fills_task_and_model_name_and_renames_tanh_gelu():
    old = {"model": {"d_model": 32, "activation": "gelu"}, "data": {}}
    new = migrate(old)
    assert new["task"] == "translation" and new["model"]["name"] == "encoder_decoder"
    assert new["model"]["activation"] == "gelu_tanh"  # 0.1's "gelu" was the tanh form
    assert old["model"] == {"d_model": 32, "activation": "gelu"}  # the input is not changed
    current = {"task": "translation", "model": {"name": "encoder_decoder", "activation": "gelu"}}
    assert migrate(current) == current  # today's "gelu" (erf) stays


def test_old_workdir_translates(old_workdir):
    translator = Translator.from_checkpoint(old_workdir)
    assert translator.steps == (12,)
    assert translator.model.cfg.max_len == 32  # from data.max_len, as 0.1 training used
    (out,) = translator.translate(["twenty-one"], beam_size=1)
    assert isinstance(out, str)
    assert Workdir.at(old_workdir).read_config().task == "translation"


@pytest.mark.slow
def test_old_workdir_resumes_and_writes_model_json(old_workdir):
    cmd = [
        "--config=configs/tiny.py",
        f"--workdir={old_workdir}",
        "--config.num_train_steps=14",
        "--config.checkpoint_every=12",
        "--config.keep_checkpoints=1",
        "--config.eval_every=14",
        "--config.eval_bleu_sentences=0",
        "--config.test_sentences=0",
        # The stored run's model: configs/tiny.py had 2+2 layers in 0.1.
        "--config.model.num_encoder_layers=2",
        "--config.model.num_decoder_layers=2",
    ]
    proc = run_train_py(cmd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "at step 12" in proc.stderr  # resumed, not restarted from scratch
    rows = [json.loads(x) for x in (old_workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["split"] == "train"][-2:] == [13, 14]
    model = json.loads((old_workdir / "model.json").read_text())
    assert model["name"] == "encoder_decoder" and model["vocab_size"] > 0
    assert Translator.from_checkpoint(old_workdir).steps == (14,)
    identity = Workdir.at(old_workdir).read_identity()  # Drawn at this first start since 0.1.
    meta = json.loads((old_workdir / "checkpoints" / "14" / "meta" / "metadata").read_text())
    assert meta["run_id"] == identity.run_id and meta["model_hash"] == identity.model_hash
