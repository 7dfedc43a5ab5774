"""A run's identity: the hash of its model, the run id every checkpoint repeats, and the refusal
of a checkpoint of another run or model (`ForeignCheckpointError`).

The files are `transformer_jax.runs.layout`'s (run.json, each checkpoint's meta); this module
decides what they must agree on, with the model registry's field defaults.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import jax
import ml_collections
import numpy as np
from etils import epath

from transformer_jax import models
from transformer_jax.runs.layout import (
    CheckpointError,
    ForeignCheckpointError,
    RunIdentity,
    Workdir,
    migrate,
)


def model_hash(config: ml_collections.ConfigDict | dict[str, Any]) -> str:
    """The sha256 (hex) of what defines a run's model: its task and its model section.

    Two configs hash alike exactly when `training.config_guard.config_conflicts` finds no task
    or model field that differs: omitted fields count at their class defaults, numbers compare
    by value (1 == 1.0), and how the model runs (`models.EXECUTION_FIELDS`) is left out, since a
    resumed run may change it. Fields at their defaults are left out of the hashed text, so a
    field added to a model later (at a default that keeps the old behaviour) leaves the hash of
    older runs as it was. The data fields are not hashed: the inference code cannot know which
    of them a task's model depends on without importing the tasks, which import it.

    Raises:
      ValueError: the model section names no registered model.
    """
    if isinstance(config, ml_collections.ConfigDict):
        config = json.loads(config.to_json_best_effort())
    config = migrate(config)
    section = config.get("model") or {}
    defaults = models.canonical_fields({"name": section.get("name")})
    fields = {
        key: _by_value(value)
        for key, value in models.canonical_fields(section).items()
        if key not in models.EXECUTION_FIELDS and (key == "name" or value != defaults[key])
    }
    text = json.dumps({"task": config.get("task"), "model": fields}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _by_value(value: Any) -> Any:
    """A number as a float (JSON writes 1 and 1.0 differently; a config means the same)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if number else value


def run_identity(workdir: Workdir, config: ml_collections.ConfigDict) -> RunIdentity:
    """This run's identity, the same on every process.

    run.json's, or for a workdir without one (a new run, or one trained before identities
    existed) a new run id: `keep_identity` writes it once the checkpoints have restored, so a
    refused checkpoint leaves the workdir as it was. Process 0 reads run.json and every process
    takes its answer.

    Raises:
      CheckpointError: run.json cannot be read, or records another model than `config`'s
        (`check_or_write_config` refuses a config that changes the model, so config.json
        itself was replaced by another run's).
    """
    want = model_hash(config)
    stored, error = None, None
    if jax.process_index() == 0:
        try:
            stored = workdir.read_identity()
            if stored is not None and stored.model_hash != want:
                raise CheckpointError(
                    f"{workdir.run_json}: this run trains the model of hash "
                    f"{stored.model_hash}, but config.json and this config describe the model "
                    f"of hash {want}: config.json was replaced by another run's. Put back this "
                    f"run's config.json and train with its settings, or use a new --workdir."
                )
        except CheckpointError as e:
            error = e
    identity = RunIdentity(stored.run_id, want) if stored else RunIdentity.new(want)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        mine = [error is None, *bytes.fromhex(identity.run_id)]
        shared = multihost_utils.broadcast_one_to_all(np.asarray(mine, np.int32))
        if not shared[0] and error is None:
            error = CheckpointError(f"process 0 could not use {workdir.run_json}: see its log.")
        identity = RunIdentity(bytes(int(x) for x in shared[1:]).hex(), want)
    if error is not None:
        raise error
    return identity


def keep_identity(workdir: Workdir, identity: RunIdentity) -> None:
    """Writes run.json if the workdir has none yet (process 0; see `run_identity`)."""
    if jax.process_index() == 0 and not workdir.run_json.exists():
        workdir.write_identity(identity)


def check_checkpoint(
    workdir: Workdir, step_dir: epath.Path, expected: RunIdentity | None = None
) -> None:
    """Refuses a checkpoint of another run, or of another model (see the module doc).

    Args:
      step_dir: a `checkpoints/<step>` folder.
      expected: a training run's identity; default run.json's run id (unchecked without
        run.json) and the hash of config.json's model.

    Raises:
      ForeignCheckpointError: naming both run ids and model hashes, and what to do.
      CheckpointError: the checkpoint's meta, run.json or config.json cannot be read.
    """
    saved = workdir.checkpoint_identity(step_dir)
    if not saved:
        return  # Saved before identities existed: nothing to compare.
    if expected is None:
        stored = workdir.read_identity()
        expected = RunIdentity(stored.run_id if stored else None, _config_hash(workdir))
    saved_run = saved.get("run_id", expected.run_id)
    other_run = expected.run_id is not None and saved_run != expected.run_id
    other_model = saved.get("model_hash", expected.model_hash) != expected.model_hash
    if not (other_run or other_model):
        return
    lines = [
        f"run id:     checkpoint {saved.get('run_id')}, workdir "
        f"{expected.run_id or 'none'} (run.json){'  <- differs' if other_run else ''}",
        f"model hash: checkpoint {saved.get('model_hash')}, workdir {expected.model_hash} "
        f"(the model of config.json){'  <- differs' if other_model else ''}",
    ]
    if other_run:
        advice = (
            f"It was copied here from another run's workdir: use the workdir it came from, "
            f"or a new --workdir; to train {workdir.path} anew, move {step_dir.parent} away. "
            f"(If this is the checkpoint's own workdir and its run.json was lost or "
            f"replaced, write the checkpoint's run id and model hash above into run.json.)"
        )
    else:
        advice = (
            f"{workdir.config_json} describes another model than the one this checkpoint "
            f"trained: it was edited or copied from another run. Put back this run's "
            f"config.json, or use the workdir the checkpoint came from; to train this "
            f"config, pass a new --workdir."
        )
    raise ForeignCheckpointError(
        f"{step_dir}: this checkpoint belongs to another "
        f"{'run' if other_run else 'model'} than the run in {workdir.path}; it is not used, "
        f"and nothing was moved:\n  " + "\n  ".join(lines) + "\n" + advice
    )


def _config_hash(workdir: Workdir) -> str:
    """`model_hash` of config.json's model (an unknown model name: an error naming it)."""
    config = workdir.read_config()
    try:
        return model_hash(config)
    except ValueError as e:
        raise CheckpointError(f"{workdir.config_json}: {e}") from e
