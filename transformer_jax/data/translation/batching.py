"""Builds the batch dicts the model consumes from tokenized pairs, with vectorized numpy.

Shapes: B rows, S source length, T target length (S == T for bucketed and packed batches).

  src      int32 [B, S]  source ids + eos, then pad (0)
  tgt_in   int32 [B, T]  bos + target ids (the decoder input, "offset by one position", §3.1)
  tgt_out  int32 [B, T]  target ids + eos (what the decoder predicts)
  weights  float32 [B, T]  1 where tgt_out is a real token, 0 on padding

Packed batches (several pairs per row) add, for each side, `*_segment_ids` (1, 2, 3, ... per
pair in the row, 0 on padding) and `*_positions` (0, 1, ... restarting with each pair).
"""

from __future__ import annotations

import numpy as np

from transformer_jax.data.tokenizer import BOS_ID, EOS_ID
from transformer_jax.data.translation.tokenized import TokenizedPairs

BATCH_KEYS = ("src", "tgt_in", "tgt_out", "weights")
PACKED_KEYS = BATCH_KEYS + ("src_segment_ids", "src_positions", "tgt_segment_ids", "tgt_positions")


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

    Returns:
      The batch dict (keys BATCH_KEYS, plus PACKED_KEYS if packed); unused rows are padding.
    """
    examples = np.asarray(examples, dtype=np.int64)
    batch = {
        key: np.zeros((num_rows, src_len if key.startswith("src") else tgt_len), np.int32)
        for key in (PACKED_KEYS if packed else BATCH_KEYS)
    }

    src_lengths = data.src_offsets[examples + 1] - data.src_offsets[examples] + 1  # + eos
    span, within = _spans(src_lengths)
    r, c = rows[span], src_starts[span] + within
    tokens = _take(data.src_ids, data.src_offsets[examples][span] + within)
    batch["src"][r, c] = np.where(within == src_lengths[span] - 1, EOS_ID, tokens)
    if packed:
        batch["src_segment_ids"][r, c] = segments[span]
        batch["src_positions"][r, c] = within

    tgt_lengths = data.tgt_offsets[examples + 1] - data.tgt_offsets[examples] + 1  # + bos / eos
    span, within = _spans(tgt_lengths)
    r, c = rows[span], tgt_starts[span] + within
    first = data.tgt_offsets[examples][span]
    batch["tgt_in"][r, c] = np.where(within == 0, BOS_ID, _take(data.tgt_ids, first + within - 1))
    batch["tgt_out"][r, c] = np.where(
        within == tgt_lengths[span] - 1, EOS_ID, _take(data.tgt_ids, first + within)
    )
    if packed:
        batch["tgt_segment_ids"][r, c] = segments[span]
        batch["tgt_positions"][r, c] = within
    batch["weights"] = (batch["tgt_out"] != 0).astype(np.float32)
    return batch


def padded_batch(
    data: TokenizedPairs, examples: np.ndarray, length: int, tgt_length: int | None = None
) -> dict[str, np.ndarray]:
    """One pair per row, padded to a fixed length.

    Args:
      data: the tokenized pairs.
      examples: int [B] pair index per row; -1 leaves the row empty (all padding, weight 0).
      length: S, also T unless `tgt_length` is given.
      tgt_length: T.

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
    )
