"""A workdir's identity on the loading side: serving (`Translator.from_checkpoint`) and
`config.init_from` refuse a checkpoint of another run (a checkpoints/ folder copied in) or of
another model than config.json describes, with the same parameter shapes; checkpoints and
workdirs from before identities still load."""

import json
import pathlib
import shutil

import optax
import pytest

from configs import bert_classify_tiny
from transformer_jax import models
from transformer_jax.inference.translator import Translator
from transformer_jax.runs.identity import model_hash
from transformer_jax.runs.layout import ForeignCheckpointError, RunIdentity, Workdir
from transformer_jax.runs.tokenizer import load_tokenizer
from transformer_jax.sharding import make_mesh
from transformer_jax.tasks import ClassificationTask
from transformer_jax.training.init_from import init_from_workdir
from transformer_jax.training.state import create_train_state

STEPS = ("10", "20", "30")  # tiny_workdir's checkpoints.


def _copy(source, target) -> pathlib.Path:
    ignore = shutil.ignore_patterns("cache", "tensorboard", "eval")
    return pathlib.Path(shutil.copytree(source, target, ignore=ignore))


def _another_run(source, target) -> tuple[pathlib.Path, RunIdentity, RunIdentity]:
    """`target`: run B of the same config as `source` (run A): its own run.json, A's
    checkpoints/ folder. Returns (B's workdir, A's identity, B's identity)."""
    run_b = _copy(source, target)
    a = Workdir.at(source).read_identity()
    b = RunIdentity.new(a.model_hash)
    Workdir.at(run_b).write_identity(b)
    return run_b, a, b


def test_translator_refuses_checkpoints_copied_from_another_run(tiny_workdir, tmp_path):
    run_b, a, b = _another_run(tiny_workdir, tmp_path / "b")
    with pytest.raises(ForeignCheckpointError) as error:
        Translator.from_checkpoint(run_b)
    message = str(error.value)
    assert a.run_id in message and b.run_id in message, message
    assert str(run_b / "checkpoints" / "30") in message and "--workdir" in message


def test_translator_refuses_a_config_json_of_another_model_with_the_same_shapes(
    tiny_workdir, tmp_path
):
    workdir = _copy(tiny_workdir, tmp_path / "run")
    config = json.loads((workdir / "config.json").read_text())
    assert config["model"]["activation"] == "relu"
    saved = Workdir.at(workdir).read_identity().model_hash
    config["model"]["activation"] = "gelu"  # What another run's config.json could say.
    (workdir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ForeignCheckpointError, match="another model") as error:
        Translator.from_checkpoint(workdir)
    message = str(error.value)
    assert saved in message and model_hash(Workdir.at(workdir).read_config()) in message
    assert "config.json" in message


@pytest.mark.parametrize("old", ["checkpoints", "workdir"])
def test_checkpoints_and_workdirs_from_before_identities_still_load(tiny_workdir, tmp_path, old):
    """Checkpoints without ids in their meta: nothing to compare. A workdir without run.json
    (say, files copied out for serving): its run id cannot be compared, its model hash is."""
    workdir = _copy(tiny_workdir, tmp_path / "old")
    if old == "checkpoints":
        for step in STEPS:
            (workdir / "checkpoints" / step / "meta" / "metadata").write_text('{"seed": 0}')
    (workdir / "run.json").unlink()
    assert Translator.from_checkpoint(workdir, average_last=3).steps == (10, 20, 30)


def test_init_from_refuses_a_pretrained_workdir_holding_another_runs_checkpoints(
    tiny_bert_workdir, tmp_path
):
    pretrained, a, b = _another_run(tiny_bert_workdir, tmp_path / "bert")
    config = bert_classify_tiny.get_config()
    tokenizer = load_tokenizer(Workdir.at(pretrained), Workdir.at(pretrained).read_config())
    data = {"vocab_size": tokenizer.vocab_size, "num_labels": 3}
    cfg = models.build_config(config.model, data)
    mesh = make_mesh({"data": -1, "fsdp": 1, "tensor": 1})
    _, state, _ = create_train_state(cfg, optax.adam(1e-3), mesh, seed=0)
    with pytest.raises(ForeignCheckpointError) as error:
        init_from_workdir(state, str(pretrained), cfg, ClassificationTask)
    assert a.run_id in str(error.value) and b.run_id in str(error.value)
    assert str(pretrained / "checkpoints") in str(error.value)
