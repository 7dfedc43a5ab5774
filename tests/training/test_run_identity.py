"""A workdir's identity (run.json) on the training side: every save carries the run id and the
model hash, and resuming refuses a checkpoint of another run or model, moving nothing (it is
not damage), while checkpoints saved before identities existed still resume."""

import json
import pathlib
import shutil

import jax
import jax.numpy as jnp
import pytest

from configs import tiny
from transformer_jax import models
from transformer_jax.runs.checkpoints import Checkpoints
from transformer_jax.runs.identity import keep_identity, model_hash, run_identity
from transformer_jax.runs.layout import (
    CheckpointError,
    ForeignCheckpointError,
    RunIdentity,
    Workdir,
)
from transformer_jax.training import train_and_evaluate

OURS = RunIdentity("a" * 32, "1" * 64)
OTHER_RUN = RunIdentity("b" * 32, OURS.model_hash)  # Another run of the same config.
OTHER_MODEL = RunIdentity(OURS.run_id, "2" * 64)  # config.json of another model.


def _state(step):
    return {"w": jnp.full((8, 8), float(step)), "b": jnp.arange(3.0) + step}


def _abstract():
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), _state(0))


def _save(workdir, identity, steps):
    ckpt = Checkpoints(workdir, identity=identity, keep=5)
    for step in steps:
        ckpt.save(step, _state(step), {"epoch": step}, {"seed": 0}, force=True)
    ckpt.wait()
    ckpt.close()


def _restore(workdir, identity):
    ckpt = Checkpoints(workdir, identity=identity, keep=5)
    try:
        return ckpt.restore_intact(_abstract())
    finally:
        ckpt.close()


def _files(path: pathlib.Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def _meta(path: pathlib.Path) -> dict:
    return json.loads((path / "meta" / "metadata").read_text())


def test_every_save_carries_the_identity_and_the_same_run_resumes(tmp_path):
    workdir = Workdir.at(tmp_path)
    _save(workdir, OURS, (1, 2))
    assert _meta(tmp_path / "checkpoints" / "2") == {"seed": 0, **OURS.as_dict()}
    state, data, meta = _restore(workdir, OURS)
    assert float(state["w"][0, 0]) == 2.0 and data == {"epoch": 2} and meta["seed"] == 0


@pytest.mark.parametrize(
    ("theirs", "named"),
    [(OTHER_RUN, ("a" * 32, "b" * 32)), (OTHER_MODEL, ("1" * 64, "2" * 64))],
    ids=["another-run", "another-model"],
)
def test_a_foreign_latest_checkpoint_stops_the_run_and_moves_nothing(tmp_path, theirs, named):
    """Ours at steps 1 and 2, a copied-in one at step 3: treated as damage, it would be moved
    to damaged/ and the run would resume from step 2."""
    workdir = Workdir.at(tmp_path)
    _save(workdir, OURS, (1, 2))
    _save(workdir, theirs, (3,))
    before = _files(tmp_path)
    with pytest.raises(ForeignCheckpointError) as error:
        _restore(workdir, OURS)
    message = str(error.value)
    assert str(tmp_path / "checkpoints" / "3") in message and str(tmp_path) in message
    assert all(x in message for x in named), message
    assert "nothing was moved" in message and "--workdir" in message
    assert _files(tmp_path) == before and not (tmp_path / "damaged").exists()


def test_a_garbled_meta_is_damage_not_another_run(tmp_path):
    """Unreadable ids prove nothing: the checkpoint is set aside as damaged, as before."""
    workdir = Workdir.at(tmp_path)
    _save(workdir, OURS, (1, 2))
    (tmp_path / "checkpoints" / "2" / "meta" / "metadata").write_text('{"run_id": ')
    state, _, _ = _restore(workdir, OURS)
    assert float(state["w"][0, 0]) == 1.0
    assert (tmp_path / "damaged" / "checkpoints" / "2").is_dir()


def test_checkpoints_saved_before_identities_resume(tmp_path):
    workdir = Workdir.at(tmp_path)
    _save(workdir, None, (1, 2))
    assert _meta(tmp_path / "checkpoints" / "2") == {"seed": 0}
    state, _, _ = _restore(workdir, OURS)
    assert float(state["b"][0]) == 2.0


# ------------------------------------------------------------------------------ run.json
def test_a_new_run_draws_an_id_written_once_the_checkpoints_restored(tmp_path):
    workdir, config = Workdir.at(tmp_path), tiny.get_config()
    identity = run_identity(workdir, config)
    assert identity.model_hash == model_hash(config) and not workdir.run_json.exists()
    assert run_identity(workdir, config).run_id != identity.run_id  # Nothing kept yet.
    keep_identity(workdir, identity)
    assert workdir.read_identity() == identity
    assert run_identity(workdir, config) == identity
    keep_identity(workdir, RunIdentity.new(identity.model_hash))  # Never replaced.
    assert workdir.read_identity() == identity


def test_a_config_json_of_another_model_is_refused_at_the_start(tmp_path):
    workdir, config = Workdir.at(tmp_path), tiny.get_config()
    keep_identity(workdir, RunIdentity.new(model_hash(config)))
    config.model.activation = "gelu"  # Same shapes, another function.
    with pytest.raises(CheckpointError, match="config.json was replaced") as error:
        run_identity(workdir, config)
    assert model_hash(config) in str(error.value) and "run.json" in str(error.value)


@pytest.mark.parametrize("text", ["{", "[]", '{"run_id": "x", "model_hash": "y"}'])
def test_a_garbled_run_json_is_named(tmp_path, text):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(CheckpointError, match="run.json is not a run identity"):
        run_identity(Workdir.at(tmp_path), tiny.get_config())


def test_model_hash_follows_config_conflicts():
    """What a resumed run may change (how the model runs, an omitted default, 0 for 0.0) keeps
    the hash; what changes the function (same shapes) does not."""
    config = tiny.get_config()
    config.model.dropout_rate = 0.0  # Not the class default: part of the hashed text.
    same = tiny.get_config()
    same.model.dropout_rate = 0.0
    same.model.scan_layers = not config.model.scan_layers
    same.model.remat = "full"
    fields = json.loads(config.to_json_best_effort())
    fields["model"]["dropout_rate"] = 0  # An int, as a hand-written config.json may say.
    del fields["model"]["layer_norm_eps"]  # Omitted: its class default, as before.
    assert model_hash(same) == model_hash(config) == model_hash(fields)
    for field, value in [("activation", "gelu"), ("norm", "pre"), ("dropout_rate", 0.2)]:
        other = tiny.get_config()
        other.model[field] = value
        assert model_hash(other) != model_hash(config), field
    other = tiny.get_config()
    other.task = "language_model"
    assert model_hash(other) != model_hash(config)


def test_a_model_field_added_at_its_default_keeps_the_hash(monkeypatch):
    """Older runs' checkpoints keep resuming when a model gains a field (at a default that
    keeps the old behaviour), as `config_conflicts` lets them."""
    config = tiny.get_config()
    before = model_hash(config)
    fields = models.canonical_fields
    monkeypatch.setattr(models, "canonical_fields", lambda s: {**fields(s), "new_field": 2.0})
    assert model_hash(config) == before


# ------------------------------------------------------------------------------ train_and_evaluate
def _resume(workdir):
    """train.py's call on the tiny workdir (the config the fixture trained, one more step)."""
    config = tiny.get_config()
    config.num_train_steps = 31
    config.eval_bleu_sentences = 0
    config.test_sentences = 0
    return train_and_evaluate(config, str(workdir))


def _copy(source, target):
    return shutil.copytree(source, target, ignore=shutil.ignore_patterns("tensorboard"))


def test_training_writes_run_json_and_its_ids_into_every_checkpoint(tiny_workdir):
    identity = Workdir.at(tiny_workdir).read_identity()
    assert identity.model_hash == model_hash(Workdir.at(tiny_workdir).read_config())
    for step in ("10", "20", "30"):
        assert _meta(tiny_workdir / "checkpoints" / step) == {"seed": 0, **identity.as_dict()}


def test_resuming_on_checkpoints_copied_from_another_run_is_refused(tiny_workdir, tmp_path):
    """Run B of the same config (its own run.json), given run A's checkpoints/ folder."""
    run_b = pathlib.Path(_copy(tiny_workdir, tmp_path / "b"))
    a = Workdir.at(tiny_workdir).read_identity()
    b = RunIdentity.new(a.model_hash)
    Workdir.at(run_b).write_identity(b)
    before = _files(run_b / "checkpoints")
    with pytest.raises(ForeignCheckpointError) as error:
        _resume(run_b)
    message = str(error.value)
    assert a.run_id in message and b.run_id in message and str(run_b / "checkpoints") in message
    assert _files(run_b / "checkpoints") == before and not (run_b / "damaged").exists()
    assert Workdir.at(run_b).read_identity() == b


def test_a_workdir_from_before_identities_resumes_and_gets_one(tiny_workdir, tmp_path):
    old = pathlib.Path(_copy(tiny_workdir, tmp_path / "old"))
    (old / "run.json").unlink()
    for step in ("10", "20", "30"):
        (old / "checkpoints" / step / "meta" / "metadata").write_text('{"seed": 0}')

    assert _resume(old)["step"] == 31

    identity = Workdir.at(old).read_identity()
    assert identity.model_hash == model_hash(tiny.get_config())
    assert _meta(old / "checkpoints" / "31") == {"seed": 0, **identity.as_dict()}
    assert _meta(old / "checkpoints" / "30") == {"seed": 0}  # Old ones stay as they were.
