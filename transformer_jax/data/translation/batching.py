"""Builds the batch dicts the model consumes from tokenized pairs, with vectorized numpy.

Shapes: B rows, S source length, T target length (S == T for bucketed and packed batches).

  src      int32 [B, S]  source ids + eos, then pad
  tgt_in   int32 [B, T]  bos + target ids (the decoder input, "offset by one position", §3.1)
  tgt_out  int32 [B, T]  target ids + eos (what the decoder predicts)
  weights  float32 [B, T]  1 where tgt_out is a pair's token (eos included), 0 on padding

Packed batches (several pairs per row) add, for each side, `*_segment_ids` (1, 2, 3, ... per
pair in the row, 0 on padding) and `*_positions` (0, 1, ... restarting with each pair).

pad, bos and eos are the tokenizer's (`SpecialIds.of`): the project's 0, 2, 1, or a converted
OPUS-MT model's `<pad>` (also its decoder start) and `</s>` = 0. So the weights come from the
pairs' lengths, never from token values.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from transformer_jax.data.translation.tokenized import TokenizedPairs
from transformer_jax.tokens import BOS_ID, EOS_ID, PAD_ID

BATCH_KEYS = ("src", "tgt_in", "tgt_out", "weights")
PACKED_KEYS = BATCH_KEYS + ("src_segment_ids", "src_positions", "tgt_segment_ids", "tgt_positions")


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    """The ids a batch is laid out with: padding, the decoder's start token, the end token."""

    pad: int = PAD_ID
    bos: int = BOS_ID
    eos: int = EOS_ID

    @classmethod
    def of(cls, tokenizer) -> SpecialIds:
        """The tokenizer's own pad, bos and eos ids."""
        return cls(int(tokenizer.pad_id), int(tokenizer.bos_id), int(tokenizer.eos_id))


PROJECT_IDS = SpecialIds()  # The ids of the tokenizers trained here (transformer_jax.tokens).


def _spans(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For spans of `lengths` laid end to end: the span of each position and its offset in it."""
    ends = np.cumsum(lengths)
    span = np.repeat(np.arange(len(lengths)), lengths)
    return span, np.arange(ends[-1] if len(ends) else 0) - np.repeat(ends - lengths, lengths)


def _take(ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """ids[positions], where positions past the end (masked by the caller) read anything."""
    if len(ids) == 0:
        return np.zeros(len(positions), np.int32)
    return ids[np.minimum(positions, len(ids) - 1)]


def build_batch(
    data: TokenizedPairs,
    examples: np.ndarray,
    rows: np.ndarray,
    src_starts: np.ndarray,
    tgt_starts: np.ndarray,
    segments: np.ndarray,
    num_rows: int,
    src_len: int,
    tgt_len: int,
    packed: bool,
    ids: SpecialIds = PROJECT_IDS,
) -> dict[str, np.ndarray]:
    """Writes pairs into fixed-shape arrays at given rows and columns.

    Args:
      data: the tokenized pairs.
      examples: int [K] pair indices to place; each must fit where it is placed.
      rows: int [K] row of each pair, in [0, num_rows).
      src_starts: int [K] first column of each pair's source (0 unless packed).
      tgt_starts: int [K] first column of each pair's target.
      segments: int [K] segment id of each pair within its row (1, 2, ...).
      num_rows: B.
      src_len: S.
      tgt_len: T.
      packed: whether to add segment ids and positions.
      ids: the pad, bos and eos ids to lay out with (the tokenizer's).

    Returns:
      The batch dict (keys BATCH_KEYS, plus PACKED_KEYS if packed); unused rows are padding.
    """
    examples = np.asarray(examples, dtype=np.int64)
    batch = {
        key: np.full(
            (num_rows, src_len if key.startswith("src") else tgt_len),
            ids.pad if key in ("src", "tgt_in", "tgt_out") else 0,
            np.float32 if key == "weights" else np.int32,
        )
        for key in (PACKED_KEYS if packed else BATCH_KEYS)
    }

    src_lengths = data.src_offsets[examples + 1] - data.src_offsets[examples] + 1  # + eos
    span, within = _spans(src_lengths)
    r, c = rows[span], src_starts[span] + within
    tokens = _take(data.src_ids, data.src_offsets[examples][span] + within)
    batch["src"][r, c] = np.where(within == src_lengths[span] - 1, ids.eos, tokens)
    if packed:
        batch["src_segment_ids"][r, c] = segments[span]
        batch["src_positions"][r, c] = within

    tgt_lengths = data.tgt_offsets[examples + 1] - data.tgt_offsets[examples] + 1  # + bos / eos
    span, within = _spans(tgt_lengths)
    r, c = rows[span], tgt_starts[span] + within
    first = data.tgt_offsets[examples][span]
    batch["tgt_in"][r, c] = np.where(within == 0, ids.bos, _take(data.tgt_ids, first + within - 1))
    batch["tgt_out"][r, c] = np.where(
        within == tgt_lengths[span] - 1, ids.eos, _take(data.tgt_ids, first + within)
    )
    batch["weights"][r, c] = 1.0
    if packed:
        batch["tgt_segment_ids"][r, c] = segments[span]
        batch["tgt_positions"][r, c] = within
    return batch


def padded_batch(
    data: TokenizedPairs,
    examples: np.ndarray,
    length: int,
    tgt_length: int | None = None,
    ids: SpecialIds = PROJECT_IDS,
) -> dict[str, np.ndarray]:
    """One pair per row, padded to a fixed length.

    Args:
      data: the tokenized pairs.
      examples: int [B] pair index per row; -1 leaves the row empty (all padding, weight 0).
      length: S, also T unless `tgt_length` is given.
      tgt_length: T.
      ids: the pad, bos and eos ids to lay out with (the tokenizer's).

    Returns:
      The batch dict, arrays [B, S] and [B, T].
    """
    examples = np.asarray(examples, dtype=np.int64)
    rows = np.flatnonzero(examples >= 0)
    zeros = np.zeros(len(rows), np.int64)
    return build_batch(
        data,
        examples[rows],
        rows,
        zeros,
        zeros,
        zeros + 1,
        len(examples),
        length,
        tgt_length or length,
        packed=False,
        ids=ids,
    )
