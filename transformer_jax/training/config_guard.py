"""The workdir's config guard: a run resumes only with a config that keeps its model, its
vocabulary and its optimizer state's layout (config.json is the run's record of them)."""

from __future__ import annotations

import json

import jax
import ml_collections

from transformer_jax import models
from transformer_jax.runs.layout import Workdir, migrate
from transformer_jax.training.optimizer import layout as optimizer_layout


def config_conflicts(saved: dict, new: dict, data_fields: tuple[str, ...] = ()) -> list[str]:
    """Lines `field: saved -> new` for every model-defining field that differs.

    `data_fields` are the `config.data` fields that fix the parameters' shapes or the meaning
    of token ids (the task's `model_defining_data_fields`).

    Model sections are compared with omitted fields at their defaults, so a workdir written
    before a field existed still resumes when the new config keeps that default. How the model
    runs (`models.EXECUTION_FIELDS`: attention kernel, layer scan, remat) may change.
    """
    saved, new = migrate(saved), migrate(new)
    diffs = []
    if saved.get("task") != new.get("task"):
        diffs.append(f"task: {saved.get('task')!r} -> {new.get('task')!r}")
    a_model, b_model = saved.get("model", {}), new.get("model", {})
    if a_model.get("name") != b_model.get("name"):
        return diffs + [f"model.name: {a_model.get('name')!r} -> {b_model.get('name')!r}"]
    a_model, b_model = models.canonical_fields(a_model), models.canonical_fields(b_model)
    for key in sorted((set(a_model) | set(b_model)) - set(models.EXECUTION_FIELDS)):
        a, b = a_model.get(key), b_model.get(key)
        if a != b:
            diffs.append(f"model.{key}: {a!r} -> {b!r}")
    for key in data_fields:
        a, b = saved.get("data", {}).get(key), new.get("data", {}).get(key)
        if a != b:
            diffs.append(f"data.{key}: {a!r} -> {b!r}")
    return diffs


def check_or_write_config(
    workdir: Workdir, config: ml_collections.ConfigDict, data_fields: tuple[str, ...] = ()
) -> None:
    """Write `config.json`, or refuse a config that conflicts with the one already there."""
    new = json.loads(config.to_json_best_effort())
    if workdir.config_json.exists():
        saved = workdir.read_config().to_dict()  # A broken config.json: an error naming it.
        diffs = config_conflicts(saved, new, data_fields)
        before, after = optimizer_layout(saved), optimizer_layout(new)
        diffs += [
            f"{key}: {before[key]} -> {after[key]} (the saved optimizer state has another layout)"
            for key in before
            if before[key] != after[key]
        ]
        if diffs:
            raise ValueError(
                f"{workdir} holds a run whose model, vocabulary or optimizer differs from this "
                f"config:\n  "
                + "\n  ".join(diffs)
                + "\nUse a new --workdir, or the same settings to resume the run."
            )
    if jax.process_index() == 0:
        workdir.path.mkdir(parents=True, exist_ok=True)
        workdir.write_config(config)


def recorded_batch_multiple(workdir: Workdir) -> int | None:
    """data.batch_multiple of the run in `workdir` (its config.json), None for a new run.

    Raises:
      CheckpointError: config.json exists but cannot be read.
    """
    if not workdir.config_json.exists():
        return None
    return workdir.read_config().get("data", {}).get("batch_multiple")
