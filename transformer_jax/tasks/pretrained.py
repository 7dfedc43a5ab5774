"""`config.init_from`: the field of the tasks that fine-tune, and what such a task reads from the
pretrained workdir before training (the loop then copies its parameters:
`transformer_jax.training.init_from`).

The pretrained workdir is one trained here or one converted from a Hugging Face checkpoint
(`python -m transformer_jax.convert`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import ml_collections
from ml_collections.config_dict import placeholder

from transformer_jax.inference import loading
from transformer_jax.inference.loading import AnyTokenizer
from transformer_jax.workdir import CheckpointError, Workdir


def add_init_from(config: ml_collections.ConfigDict) -> None:
    """Adds `config.init_from` (for a task that declares `fresh_params`, if any, and reads it)."""
    config.init_from = placeholder(str)  # Workdir (trained here or converted) to start from.


def check_init_from(config: ml_collections.ConfigDict) -> None:
    """Raises unless `config.init_from` is unset, '' (from scratch) or a path."""
    init_from = config.get("init_from")
    if init_from is not None and not isinstance(init_from, str):
        raise ValueError(f"config.init_from must be a workdir path or '', got {init_from!r}.")


class PretrainedRun(NamedTuple):
    """A pretrained workdir as the loaders read it."""

    workdir: Workdir
    config: ml_collections.ConfigDict  # Its config.json.
    model_cfg: Any  # Its model's config dataclass (model.json).
    tokenizer: AnyTokenizer | None  # Only for a 0.1 workdir, whose model needs it; else None.


def pretrained_workdir(init_from: str, task: str) -> Workdir:
    """The workdir `init_from` names; `CheckpointError` saying how to make one when there is
    none."""
    workdir = Workdir.at(init_from)
    if not workdir.path.is_dir():
        raise CheckpointError(
            f"config.init_from={init_from!r} (the {task} task): no such workdir. Pretrain first "
            f"(python train.py --config=configs/<NAME>.py --workdir={init_from}), or convert a "
            f"Hugging Face checkpoint there (python -m transformer_jax.convert --from_hf=<DIR> "
            f"--workdir={init_from}), or set --config.init_from='' to train from scratch."
        )
    return workdir


def read_pretrained(init_from: str, task: str) -> PretrainedRun:
    """The pretrained workdir's config and model config (errors name the file and `task`)."""
    workdir = pretrained_workdir(init_from, task)
    config = workdir.read_config()
    # model.json describes the model whole; only a 0.1 workdir needs its tokenizer for that.
    tokenizer = None if workdir.model_json.is_file() else loading.load_tokenizer(workdir, config)
    return PretrainedRun(
        workdir, config, loading.load_model_config(workdir, config, tokenizer), tokenizer
    )
