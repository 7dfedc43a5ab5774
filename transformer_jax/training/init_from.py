"""Start a run from another run's parameters (`config.init_from`): fine-tuning.

The other run is a workdir trained here or one converted from a Hugging Face checkpoint
(`transformer_jax.interop`; its checkpoint holds the parameters only). Every parameter is
copied from its latest checkpoint except the task's fresh ones (`Task.fresh_params`, e.g. a
classifier's head), which keep their new initialisation; the optimizer starts anew. The model
fields must match the pretrained model's: only the dropout rates, the dtype, how the model runs
(`models.EXECUTION_FIELDS`) and the fields that size the fresh parameters
(`Task.fresh_fields`, e.g. the number of labels) may differ. A wrong section, another
vocabulary or another image size is an error naming the fields and the values to set, never a
silent partial load.

Any task whose config has `init_from` (`tasks.pretrained.add_init_from`) gets this from the
training loop; a text task takes the pretrained tokenizer itself (`tasks.pretrained`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from flax import nnx

from transformer_jax import models
from transformer_jax.nn.stacked import stacked_layout, to_layout
from transformer_jax.runs import reading
from transformer_jax.tasks.pretrained import read_pretrained
from transformer_jax.training.state import TrainState

# Fields that may differ from the pretrained model's in any task: they change how the model is
# trained or run, not its parameters.
FREE_FIELDS = ("dropout_rate", "attention_dropout_rate", "dtype", *models.EXECUTION_FIELDS)


def _path(path) -> str:
    return "/".join(reading.key_name(k) for k in path)


def _flag(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def check_same_model(
    model_cfg: Any,
    pretrained_cfg: Any,
    where: str,
    *,
    task: str | None = None,
    free: tuple[str, ...] = (),
    hints: Mapping[str, str] | None = None,
) -> None:
    """Raises naming every field that differs from the pretrained model's.

    Args:
      model_cfg: the config dataclass this run builds (the data's values filled in).
      pretrained_cfg: the pretrained model's (its model.json).
      where: the pretrained model's file, for the message.
      task: the task's name, for the message (None: not named).
      free: fields besides FREE_FIELDS that may differ (those sizing the fresh parameters).
      hints: for fields the data decides (the image size, the vocabulary), what to set so
        that the data gives the pretrained value; "{value}" stands for that value. Other
        fields are named as the `--config.model.<field>=<value>` override that fixes them.

    Raises:
      ValueError: another model class, or fields that differ (each with its fix).
    """
    ours = f"the {task} task's" if task else "this"
    if type(model_cfg) is not type(pretrained_cfg):
        raise ValueError(
            f"config.init_from: {where} holds a {type(pretrained_cfg).__name__} model, but "
            f"{ours} config builds a {type(model_cfg).__name__}."
        )
    hints = hints or {}
    if getattr(pretrained_cfg, "positional", "learned").startswith("sinusoidal"):
        free = (*free, "max_len")  # Sinusoidal positions are computed, not learned: any length.
    allowed = (*FREE_FIELDS, *free)
    differ = [
        (f.name, getattr(model_cfg, f.name), getattr(pretrained_cfg, f.name))
        for f in dataclasses.fields(model_cfg)
        if f.name not in allowed and getattr(model_cfg, f.name) != getattr(pretrained_cfg, f.name)
    ]
    if not differ:
        return
    lines = [
        f"{name}: this config {mine!r}, pretrained {theirs!r}" for name, mine, theirs in differ
    ]
    fixes = list(dict.fromkeys(hints[n].format(value=v) for n, _, v in differ if n in hints))
    overrides = [f"--config.model.{n}={_flag(theirs)}" for n, _, theirs in differ if n not in hints]
    if overrides:
        fixes.append(
            "set the model section as the pretrained model has it (every field is in "
            f"{where}): " + " ".join(overrides)
        )
    may_differ = ", ".join(("the dropout rates", "dtype", *free))
    raise ValueError(
        f"config.init_from: {ours} model differs from the pretrained one in "
        f"{where}:\n  "
        + "\n  ".join(lines)
        + f"\nOnly {may_differ} and how the model runs may differ. To fine-tune it:\n  "
        + "\n  ".join(fixes)
    )


def init_from_workdir(
    state: TrainState, init_from: str, model_cfg: Any, task: Any, also_fresh: tuple[str, ...] = ()
) -> tuple[TrainState, str]:
    """`state` with every parameter but the task's fresh ones taken from `init_from`'s latest
    checkpoint, each placed in the sharding of the parameter it replaces.

    Args:
      state: the new run's freshly initialised state.
      init_from: the pretrained workdir (trained here, or converted).
      model_cfg: the new run's model config.
      task: the task (class or instance): its `name`, `fresh_params` (top-level parameter
        names that keep their new initialisation), `fresh_fields` and `init_from_hints` (see
        `check_same_model`).
      also_fresh: more top-level parameter names that keep their new initialisation
        (`config.init_fresh`, e.g. the pooler).

    Returns:
      (the new state, a line saying what was loaded).

    Raises:
      CheckpointError: the workdir or its files cannot be used (named); also
        `ForeignCheckpointError` when its checkpoint is another run's than its run.json names,
        or another model's than its config.json describes (see `transformer_jax.runs.layout`).
      ValueError: the model fields, parameter shapes or vocabulary differ (named).
    """
    fresh = tuple(task.fresh_params) + tuple(also_fresh)
    top = sorted(
        {_path(p).split("/")[0] for p, _ in jax.tree_util.tree_flatten_with_path(state.params)[0]}
    )
    unknown = [name for name in also_fresh if name not in top]
    if unknown:
        raise ValueError(
            f"config.init_fresh names {unknown}, which the model does not have; its top-level "
            f"parameters are {top}."
        )
    workdir, config, pretrained_cfg, tokenizer = read_pretrained(init_from, task.name)
    check_same_model(
        model_cfg,
        pretrained_cfg,
        str(workdir.model_json),
        task=task.name,
        free=tuple(task.fresh_fields),
        hints=task.init_from_hints,
    )
    model, steps = reading.load_model(workdir, config, tokenizer)
    pretrained = nnx.state(model)
    stacked = stacked_layout(state.params)  # the pretrained run may have scanned otherwise
    if stacked is not None:
        pretrained = to_layout(pretrained, stacked)
    pretrained = {_path(p): leaf for p, leaf in jax.tree_util.tree_flatten_with_path(pretrained)[0]}
    copied, kept = [], []

    def take(path, leaf):
        name = _path(path)
        if name.split("/")[0] in fresh:
            kept.append(name)
            return leaf
        if name not in pretrained or pretrained[name].shape != leaf.shape:
            found = pretrained[name].shape if name in pretrained else "nothing"
            raise ValueError(
                f"config.init_from: parameter {name} has shape {leaf.shape} here but "
                f"{found} in {workdir}. Use the pretrained run's model section and tokenizer."
            )
        copied.append(name)
        return jax.device_put(np.asarray(pretrained[name]), leaf.sharding).astype(leaf.dtype)

    params = jax.tree_util.tree_map_with_path(take, state.params)
    new = f" ({', '.join(fresh)})" if fresh else ""
    note = (
        f"initialised from {workdir} step {steps[-1]}: {len(copied)} parameter arrays copied, "
        f"{len(kept)} new{new}"
    )
    return state.replace(params=params), note
