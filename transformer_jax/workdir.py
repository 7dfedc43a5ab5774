"""The layout of a run's directory: what training writes and inference reads, in one place.

    config.json          the resolved training config (checked on every restart)
    model.json           the model's name and every field of its config (the data's values in)
    tokenizer.model      the SentencePiece model (+ tokenizer.json: the settings it came from)
    corpus.json          what a language model read: per split documents and bytes; for the
                         embedded stdlib corpus, the Python version and a content hash
    cache/               generated corpora and tokenized splits
    checkpoints/<step>/  the latest saves: train state, data-iterator state, metadata
    best/<step>/         the best save by the task's validation metric
    metrics.jsonl, tensorboard/, curves.png    logs and plots
    eval/                hypotheses and scores written by `python -m transformer_jax.evaluate`

A workdir is a local folder or a Cloud Storage URI (`gs://bucket/run`): every path is an
`etils.epath.Path` (see `transformer_jax.storage`).

Workdirs written by transformer_jax 0.1 (no `task` in config.json, no model.json) are read
as today's: `migrate` fills in what they lack.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import ml_collections
from etils import epath

from transformer_jax import storage

LEGACY_TASK = "translation"  # 0.1 workdirs: the only task there was,
LEGACY_MODEL = "encoder_decoder"  # and the only model.


class CheckpointError(ValueError):
    """A workdir, config, tokenizer or checkpoint that cannot be used; the message names the
    file, what is wrong with it, and what to do."""


def migrate(fields: dict[str, Any]) -> dict[str, Any]:
    """A config.json of any version as today's code reads it.

    0.1 runs had no `task` and no `model.name` (always translation with the encoder-decoder),
    and their `activation="gelu"` was the tanh approximation, today's "gelu_tanh".
    """
    fields = json.loads(json.dumps(fields))  # A deep copy.
    model = fields.get("model")
    if "task" not in fields and isinstance(model, dict) and "name" not in model:
        fields["task"] = LEGACY_TASK
        model["name"] = LEGACY_MODEL
        if model.get("activation") == "gelu":
            model["activation"] = "gelu_tanh"
    return fields


def _child(name: str) -> property:
    """A read-only attribute: the path of `name` inside the workdir (see the module doc)."""
    return property(lambda self: self.path / name, doc=f"`workdir/{name}`")


@dataclasses.dataclass(frozen=True)
class Workdir:
    """The paths of one run's directory (nothing is created until something is written)."""

    path: epath.Path

    @classmethod
    def at(cls, path: str | os.PathLike) -> Workdir:
        """The workdir at `path`: a local folder (made absolute) or a `gs://` URI."""
        return cls(storage.as_path(path))

    def __str__(self) -> str:
        return str(self.path)

    # ------------------------------------------------------------------------------ paths
    config_json = _child("config.json")
    model_json = _child("model.json")
    tokenizer_model = _child("tokenizer.model")
    tokenizer_settings = _child("tokenizer.json")
    corpus_json = _child("corpus.json")
    labels_json = _child("labels.json")  # A classifier's label names and input kind.
    cache = _child("cache")
    checkpoints = _child("checkpoints")
    best = _child("best")
    metrics = _child("metrics.jsonl")
    tensorboard = _child("tensorboard")
    curves = _child("curves.png")
    eval = _child("eval")

    # ------------------------------------------------------------------------------ files
    def require(self) -> Workdir:
        """Self, or `CheckpointError` when the directory does not exist."""
        if not self.path.is_dir():
            raise CheckpointError(
                f"{self.path}: workdir does not exist (or is not a directory). Pass the "
                f"--workdir that train.py wrote, e.g. runs/default."
            )
        return self

    def read_config(self) -> ml_collections.ConfigDict:
        """The run's config from config.json, migrated to today's fields."""
        path = self.config_json
        if not path.is_file():
            raise CheckpointError(
                f"{path}: config.json is missing, so the model's shape is unknown. Is "
                f"{self.path} a train.py workdir? Training writes config.json before its first "
                f"step."
            )
        try:
            fields = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(
                f"{path}: config.json is not readable JSON ({e}). Restore it from the run's "
                f"config file (train.py writes it on start)."
            ) from e
        if not isinstance(fields, dict) or not isinstance(fields.get("model"), dict):
            raise CheckpointError(
                f"{path}: config.json has no `model` section; it is not a run config."
            )
        return ml_collections.ConfigDict(migrate(fields))

    def write_config(self, config: ml_collections.ConfigDict) -> None:
        """Writes config.json (atomically where the storage allows)."""
        fields = json.loads(config.to_json_best_effort())
        storage.write_text_atomic(self.config_json, json.dumps(fields, indent=2, sort_keys=True))

    def read_model(self) -> dict[str, Any] | None:
        """The model section of model.json (name + every field), or None if there is none."""
        if not self.model_json.is_file():
            return None
        try:
            fields = json.loads(self.model_json.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(
                f"{self.model_json}: model.json is not readable JSON ({e}). Delete it: the next "
                f"`train.py --workdir={self.path}` writes it again from config.json."
            ) from e
        if not isinstance(fields, dict) or "name" not in fields:
            raise CheckpointError(f"{self.model_json}: model.json has no model `name`.")
        return fields

    def write_model(self, name: str, cfg: Any) -> None:
        """Writes model.json: the model's name and every field of its config dataclass."""
        fields = {"name": name, **dataclasses.asdict(cfg)}
        storage.write_text_atomic(self.model_json, json.dumps(fields, indent=2, sort_keys=True))
