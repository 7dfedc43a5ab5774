"""Which tokenizer a run uses, one rule for every task, at training and at serving.

- `data.tokenizer="byte"`: bytes, nothing stored.
- A converted checkpoint's tokenizer folder (`workdir/tokenizer/`, see
  `transformer_jax.interop`), also in runs fine-tuned from one.
- Else the run's own `tokenizer.model`. An external `data.spm_model_path` is copied there at the
  run's first start (`kept_copy`) and refused on resume when the file has changed since, so
  serving, evaluation and `init_from` read the run's copy whatever becomes of the file.
"""

from __future__ import annotations

import os

import ml_collections
from etils import epath

from transformer_jax import storage
from transformer_jax.data import pretrained_tokenizer as pretrained
from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.data.pretrained_tokenizer import MarianTokenizer, PretrainedTokenizer
from transformer_jax.data.tokenizer import Tokenizer
from transformer_jax.runs.layout import CheckpointError, Workdir

# They share encode/decode/vocab_size/special ids; the last two are converted checkpoints'.
AnyTokenizer = Tokenizer | ByteTokenizer | PretrainedTokenizer | MarianTokenizer


def load_tokenizer(workdir: Workdir, config: ml_collections.ConfigDict) -> AnyTokenizer:
    """The tokenizer of the run: bytes (`data.tokenizer="byte"`), a converted checkpoint's
    (`workdir/tokenizer/`, see `transformer_jax.interop`; also in runs fine-tuned from one), else
    `workdir/tokenizer.model`, else `data.spm_model_path`."""
    kind = config.get("data", {}).get("tokenizer")
    if kind == "byte":
        return ByteTokenizer()
    if kind == "pretrained" or pretrained.in_workdir(workdir.path):
        try:
            return pretrained.load(workdir.path / pretrained.WORKDIR_FOLDER)
        except ValueError as e:
            raise CheckpointError(f"{e} (the tokenizer of {workdir}).") from e
    path = workdir.tokenizer_model
    external = config.get("data", {}).get("spm_model_path")
    if not path.is_file() and external:
        path = epath.Path(external)
    if not path.is_file():
        raise CheckpointError(
            f"{path}: tokenizer.model is missing. Copy the SentencePiece model the run was "
            f"trained with into the workdir (train.py writes it there)."
        )
    try:
        return Tokenizer(path.read_bytes(), origin=str(path))
    except (OSError, RuntimeError, ValueError, TypeError) as e:
        raise CheckpointError(
            f"{path}: tokenizer.model is not a usable SentencePiece model ({e}). Copy the "
            f"tokenizer.model the run was trained with back into the workdir."
        ) from e


def kept_copy(path: str | os.PathLike, kept: str | os.PathLike) -> Tokenizer:
    """The SentencePiece model at `path` (a run's `data.spm_model_path`), copied to `kept` (the
    workdir's tokenizer.model) at the run's start, so that the workdir stands alone: serving,
    evaluation and `init_from` read the run's copy, whatever becomes of the file.

    Raises:
      ValueError: `kept` holds another model (the file at `path` changed since the run began).
    """
    tokenizer = Tokenizer.load(path)
    kept = storage.as_path(kept)
    if not kept.exists():
        tokenizer.save(kept)
    elif kept.read_bytes() != tokenizer.model_proto:
        raise ValueError(
            f"data.spm_model_path={str(path)!r} is not the tokenizer {kept} was started with. "
            f"Use a new workdir, or point spm_model_path at the run's tokenizer.model."
        )
    return tokenizer
