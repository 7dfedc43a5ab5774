"""The layout of a run's directory: what training writes and inference reads, in one place.

    config.json          the resolved training config (checked on every restart)
    run.json             the run's identity: its run id and its model's hash (`RunIdentity`)
    model.json           the model's name and every field of its config (the data's values in)
    tokenizer.model      the SentencePiece model (+ tokenizer.json: the settings it came from)
    corpus.json          what a language model read: per split documents and bytes; for the
                         embedded stdlib corpus, the Python version and a content hash
    labels.json          a classifier's label names and whether it reads pairs
    embedding.json       a converted sentence-transformers model's pooling and longest input
                         (`transformer_jax.inference.pooling.EmbeddingSettings`)
    cache/               generated corpora and tokenized splits
    checkpoints/<step>/  the latest saves: train state, data-iterator state, metadata
                         (`meta/metadata`: the seed, and the run id and model hash of run.json)
    best/<step>/         the best save by the task's validation metric
    metrics.jsonl, tensorboard/, curves.png    logs and plots
    profile/             `jax.profiler` traces of `config.profile_steps`
                         (plugins/profile/RUN/HOST.xplane.pb, *.trace.json.gz)
    eval/                hypotheses and scores written by `python -m transformer_jax evaluate`

A workdir is a local folder or a Cloud Storage URI (`gs://bucket/run`): every path is an
`etils.epath.Path` (see `transformer_jax.storage`).

Workdirs written by transformer_jax 0.1 (no `task` in config.json, no model.json) are read
as today's: `migrate` fills in what they lack.

Identity: a workdir is one run. Its first training start draws a run id (run.json, written by
process 0), and every checkpoint's meta repeats it with the hash of the model it trained
(`model_hash`). Resuming, serving and `config.init_from` refuse a checkpoint whose run id is
not run.json's, or whose model hash is not that of the model config.json describes
(`ForeignCheckpointError`): a checkpoints/ folder copied in from another run, or a config.json
taken from another run, would otherwise load silently when the parameter shapes agree.
Checkpoints saved before identities existed carry neither and are accepted; a workdir without
run.json gets one at its next training start.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import uuid
from typing import Any

import ml_collections
from etils import epath

from transformer_jax import storage

LEGACY_TASK = "translation"  # 0.1 workdirs: the only task there was,
LEGACY_MODEL = "encoder_decoder"  # and the only model.


class CheckpointError(ValueError):
    """A workdir, config, tokenizer or checkpoint that cannot be used; the message names the
    file, what is wrong with it, and what to do."""


class ForeignCheckpointError(CheckpointError):
    """A checkpoint of another run, or of another model than the workdir's config.json
    describes. Not damage: a run stops on it, and nothing is moved."""


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


_RUN_ID = re.compile(r"[0-9a-f]{32}")
_HASH = re.compile(r"[0-9a-f]{64}")


@dataclasses.dataclass(frozen=True)
class RunIdentity:
    """Which run wrote a checkpoint, and for which model (see the module doc).

    Attributes:
      run_id: a random id (uuid4 hex) drawn when the workdir is first trained; None for a
        workdir that has no run.json (not trained since identities exist): not checked then.
      model_hash: `model_hash` of the run's config.
    """

    run_id: str | None
    model_hash: str

    @classmethod
    def new(cls, model_hash: str) -> RunIdentity:
        return cls(uuid.uuid4().hex, model_hash)

    def as_dict(self) -> dict[str, str | None]:
        """The fields run.json holds and every checkpoint's meta repeats."""
        return {"run_id": self.run_id, "model_hash": self.model_hash}


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
    run_json = _child("run.json")
    model_json = _child("model.json")
    tokenizer_model = _child("tokenizer.model")
    tokenizer_settings = _child("tokenizer.json")
    corpus_json = _child("corpus.json")
    labels_json = _child("labels.json")  # A classifier's label names and input kind.
    embedding_json = _child("embedding.json")  # A sentence embedder's pooling (converted).
    cache = _child("cache")
    checkpoints = _child("checkpoints")
    best = _child("best")
    metrics = _child("metrics.jsonl")
    tensorboard = _child("tensorboard")
    curves = _child("curves.png")
    profile = _child("profile")  # TensorBoard's / XProf's --logdir for the traces.
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
            hint = ""
            if isinstance(fields, dict) and "model_type" in fields:  # A Hugging Face folder.
                hint = (
                    f" It is a Hugging Face model's (model_type {fields['model_type']!r}): "
                    f"convert the folder into a workdir first, `transformer-jax convert "
                    f"--from_hf={self.path} --workdir=NEW`, and pass NEW."
                )
            raise CheckpointError(
                f"{path}: config.json has no `model` section; it is not a run config.{hint}"
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

    # ------------------------------------------------------------------------------ identity
    def read_identity(self) -> RunIdentity | None:
        """run.json's identity, or None when the workdir has none (not trained since
        identities exist: its next training start writes one)."""
        path = self.run_json
        if not path.is_file():
            return None
        try:
            fields = json.loads(path.read_text())
            identity = RunIdentity(fields["run_id"], fields["model_hash"])
            valid = _RUN_ID.fullmatch(identity.run_id) and _HASH.fullmatch(identity.model_hash)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
            valid = False
        if not valid:
            raise CheckpointError(
                f"{path}: run.json is not a run identity (a JSON object with a 32-hex-digit "
                f"`run_id` and a 64-hex-digit `model_hash`). Write back the ids this run's "
                f"checkpoints carry: each {self.checkpoints}/<step>/meta/metadata holds them."
            )
        return identity

    def write_identity(self, identity: RunIdentity) -> None:
        """Writes run.json (atomically where the storage allows)."""
        text = json.dumps(identity.as_dict(), indent=2, sort_keys=True)
        storage.write_text_atomic(self.run_json, text)

    def checkpoint_identity(self, step_dir: epath.Path) -> dict[str, Any]:
        """The run id and model hash a checkpoint's meta holds: those it has, none for a
        checkpoint saved before identities existed (or without a meta item).

        Raises:
          CheckpointError: the meta item is not readable JSON (a damaged save).
        """
        path = step_dir / "meta" / "metadata"  # The JSON Orbax writes for the `meta` item.
        if not path.is_file():
            return {}
        try:
            meta = json.loads(path.read_text())
            if not isinstance(meta, dict):
                raise ValueError(f"a JSON {type(meta).__name__}")
        except (OSError, UnicodeDecodeError, ValueError) as e:  # JSONDecodeError included.
            raise CheckpointError(
                f"{path}: the checkpoint's metadata is not a JSON object ({e}). The save is "
                f"damaged; pass another --step, or delete {step_dir}."
            ) from e
        return {key: meta[key] for key in ("run_id", "model_hash") if key in meta}
