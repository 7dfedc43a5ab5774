"""What encoder (BERT) inference shares: loading an encoder workdir and batching its inputs.

Inputs are laid out by `transformer_jax.data.bert.inputs` (as in fine-tuning) and padded to a
power-of-two length, so a handful of shapes are compiled whatever the texts.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Sequence

import numpy as np
from flax import nnx
from jax.sharding import Mesh

from transformer_jax.data.bert.inputs import PROJECT, Specials, layout, real_tokens
from transformer_jax.data.pretrained_tokenizer import PretrainedTokenizer
from transformer_jax.data.tokenizer import Tokenizer
from transformer_jax.inference import loading
from transformer_jax.inference.mesh import MeshLike, serving_mesh
from transformer_jax.workdir import CheckpointError, Workdir

MIN_LENGTH = 16  # Shortest padded length: fewer compiled shapes for short texts.


@dataclasses.dataclass(frozen=True)
class EncoderRun:
    """A loaded encoder workdir: model, tokenizer, config and the steps loaded."""

    model: nnx.Module
    tokenizer: Tokenizer | PretrainedTokenizer  # The latter: a converted checkpoint's.
    workdir: Workdir
    task: str
    steps: list[int]
    mesh: Mesh | None = None  # The mesh the parameters are sharded over (None: replicated).


def load_encoder(
    workdir: str | os.PathLike,
    tasks: Sequence[str],
    what: str,
    step=None,
    mesh: MeshLike | None = None,
) -> EncoderRun:
    """The encoder-only model of a workdir whose task is one of `tasks`, replicated on this
    host's devices or sharded over `mesh` (see `transformer_jax.inference.mesh`).

    Raises:
      MeshError: `mesh` does not fit the devices or the model.
      CheckpointError: not such a workdir, or a file is missing or damaged (named).
    """
    mesh = serving_mesh(mesh)  # A bad mesh fails before anything is read.
    workdir = Workdir.at(workdir).require()
    config = workdir.read_config()
    task, name = config.get("task"), config.model.get("name")
    if name != "encoder_only" or task not in tasks:
        raise CheckpointError(
            f"{workdir.config_json}: the run is a {task!r} task with a {name!r} model; {what} "
            f"needs an 'encoder_only' model trained for {list(tasks)} (a configs/bert_*.py run, "
            f"or a BERT converted with `convert --from_hf`)."
        )
    tokenizer = loading.load_tokenizer(workdir, config)
    model, steps = loading.load_model(workdir, config, tokenizer, step, mesh=mesh)
    return EncoderRun(model, tokenizer, workdir, task, steps, mesh)


def padded_length(longest: int, max_len: int) -> int:
    """The next power of two from `longest` (at least MIN_LENGTH), at most `max_len`."""
    length = MIN_LENGTH
    while length < longest:
        length *= 2
    return min(length, max_len)


def batch_inputs(
    encoded: Sequence[tuple[list[int], list[int] | None]],
    max_len: int,
    *,
    rows: int,
    specials: Specials = PROJECT,
) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, segment ids), int32 [rows, L]: the inputs laid out with `specials` (the
    tokenizer's [CLS] and [SEP], `specials_of`), padded to rows and a
    power-of-two length. An input longer than `max_len` is truncated with a warning."""
    laid = []
    for i, (a, b) in enumerate(encoded):
        tokens, segments, truncated = layout(a, b, max_len, specials)
        if truncated:
            kept = int(real_tokens(tokens).sum())
            warnings.warn(
                f"input {i} has {len(a) + len(b or ()) + (2 if b is None else 3)} tokens, more "
                f"than the model's {max_len}: truncated to {kept} (the end of the longer text "
                f"is cut).",
                stacklevel=3,
            )
        laid.append((tokens, segments))
    length = padded_length(max(int(real_tokens(t).sum()) for t, _ in laid), max_len)
    out = np.zeros((2, rows, length), np.int32)
    for r, (tokens, segments) in enumerate(laid):
        out[0, r], out[1, r] = tokens[:length], segments[:length]
    return out[0], out[1]
