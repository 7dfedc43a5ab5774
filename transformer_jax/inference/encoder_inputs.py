"""What encoder (BERT) inference shares: loading an encoder workdir and batching its inputs.

Inputs are laid out by `transformer_jax.data.bert.inputs` (as in fine-tuning) and padded to a
power-of-two length, so a handful of shapes are compiled whatever the texts.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import numpy as np

from transformer_jax.data.bert.inputs import PROJECT, Specials, layout, real_tokens
from transformer_jax.runs.load import Expect, Run, load_run
from transformer_jax.serving_mesh import MeshLike

MIN_LENGTH = 16  # Shortest padded length: fewer compiled shapes for short texts.


def load_encoder(
    workdir: str | os.PathLike,
    tasks: Sequence[str],
    what: str,
    step=None,
    mesh: MeshLike | None = None,
) -> Run:
    """The encoder-only model of a workdir whose task is one of `tasks`, replicated on this
    host's devices or sharded over `mesh` (see `transformer_jax.serving_mesh`).

    Raises:
      MeshError: `mesh` does not fit the devices or the model.
      CheckpointError: not such a workdir, or a file is missing or damaged (named).
    """
    expect = Expect(
        what,
        tasks=tuple(tasks),
        models=("encoder_only",),
        needs=f"an 'encoder_only' model trained for {list(tasks)} (a configs/bert_*.py run, or "
        f"a BERT converted with `convert --from_hf`).",
    )
    return load_run(workdir, step, mesh=mesh, expect=expect)


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
