"""Start a run from another run's parameters (`config.init_from`): BERT fine-tuning.

Every parameter is copied from the pretrained workdir's latest checkpoint except the task's
fresh ones (e.g. the classification heads), which keep their new initialisation; the optimizer
starts anew. The model fields must match the pretrained model's (only the number of labels and
the dropout rates may differ), so a wrong section or another vocabulary is an error naming the
fields, not a silent partial load.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
from flax import nnx

from transformer_jax.inference import loading
from transformer_jax.nn.stacked import stacked_layout, to_layout
from transformer_jax.training.state import TrainState
from transformer_jax.workdir import CheckpointError, Workdir

FREE_FIELDS = ("num_labels", "dropout_rate", "attention_dropout_rate", "dtype")


def _path(path) -> str:
    return "/".join(loading.key_name(k) for k in path)


def check_same_model(model_cfg: Any, pretrained_cfg: Any, where: str) -> None:
    """Raises naming every field (but FREE_FIELDS) that differs from the pretrained model's."""
    if type(model_cfg) is not type(pretrained_cfg):
        raise ValueError(
            f"config.init_from: {where} holds a {type(pretrained_cfg).__name__} model, but "
            f"this config builds a {type(model_cfg).__name__}."
        )
    differ = [
        f"{f.name}: this config {getattr(model_cfg, f.name)!r}, pretrained "
        f"{getattr(pretrained_cfg, f.name)!r}"
        for f in dataclasses.fields(model_cfg)
        if f.name not in FREE_FIELDS
        and getattr(model_cfg, f.name) != getattr(pretrained_cfg, f.name)
    ]
    if differ:
        raise ValueError(
            f"config.init_from: the model differs from the pretrained one in {where}:\n  "
            + "\n  ".join(differ)
            + "\nUse the pretrained run's model section (its preset and overrides) and its "
            "tokenizer; only num_labels and the dropout rates may change."
        )


def init_from_workdir(
    state: TrainState, init_from: str, model_cfg: Any, fresh: tuple[str, ...]
) -> tuple[TrainState, str]:
    """`state` with every parameter but those under `fresh` taken from `init_from`'s latest
    checkpoint, each placed in the sharding of the parameter it replaces.

    Returns:
      (the new state, a line saying what was loaded).

    Raises:
      CheckpointError: the workdir or its files cannot be used (named); also
        `ForeignCheckpointError` when its checkpoint is another run's than its run.json names,
        or another model's than its config.json describes (see `transformer_jax.workdir`).
      ValueError: the model fields, parameter shapes or vocabulary differ (named).
    """
    workdir = Workdir.at(init_from)
    if not workdir.path.is_dir():
        raise CheckpointError(
            f"config.init_from={init_from!r}: no such workdir. Pretrain first (e.g. python "
            f"train.py --config=configs/bert_stdlib_pretrain.py --workdir={init_from}), or "
            f"set --config.init_from='' to train from scratch."
        )
    config = workdir.read_config()
    tokenizer = loading.load_tokenizer(workdir, config)
    pretrained_cfg = loading.load_model_config(workdir, config, tokenizer)
    check_same_model(model_cfg, pretrained_cfg, str(workdir.model_json))
    model, steps = loading.load_model(workdir, config, tokenizer)
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
    note = (
        f"initialised from {workdir} step {steps[-1]}: {len(copied)} parameter arrays copied, "
        f"{len(kept)} new ({', '.join(fresh)})"
    )
    return state.replace(params=params), note
