"""Which pairs go into which batch, epoch by epoch: length buckets and packing, in numpy.

An epoch's plan depends only on (seed, epoch) and the pair lengths, so any batch of any epoch
can be rebuilt exactly, which is what makes the iterator's state two integers.

Bucketing (§5.1: "Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately 25000 source tokens and
25000 target tokens."): a pair goes to the first bucket whose length holds both its sides (eos /
bos included); each bucket's row count fills the token budget. Every host has the same number of
batches per bucket (`batches_per_bucket`, agreed across hosts) and the order of buckets in an
epoch is drawn from a host-independent seed, so all hosts yield the same shapes at every step.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


def rows_per_bucket(
    tokens_per_batch: int, lengths: tuple[int, ...], batch_multiple: int, process_count: int
) -> tuple[int, ...]:
    """Returns each bucket's rows per host, filling the global token budget.

    Global rows R = the largest multiple of lcm(batch_multiple, process_count) with
    R * length <= tokens_per_batch; each host yields R / process_count of them.

    Args:
      tokens_per_batch: global budget of (padded) tokens per side and step.
      lengths: the bucket lengths.
      batch_multiple: global rows must be divisible by this (data-parallel devices).
      process_count: number of hosts.

    Returns:
      Host-local rows per bucket.

    Raises:
      ValueError: the budget cannot hold one multiple of rows of the longest bucket.
    """
    multiple = math.lcm(batch_multiple, process_count)
    rows = []
    for length in lengths:
        global_rows = tokens_per_batch // length // multiple * multiple
        if global_rows == 0:
            raise ValueError(
                f"data config field 'tokens_per_batch': {tokens_per_batch} tokens cannot hold "
                f"{multiple} rows (lcm of batch_multiple={batch_multiple} and "
                f"{process_count} processes) of length {length}. Use at least "
                f"{multiple * length}, or lower max_len."
            )
        rows.append(global_rows // process_count)
    return tuple(rows)


def assign_buckets(
    src_lengths: np.ndarray, tgt_lengths: np.ndarray, lengths: tuple[int, ...]
) -> np.ndarray:
    """Returns the bucket of each pair: the first whose length holds source+eos and bos+target.

    Args:
      src_lengths, tgt_lengths: int [N] tokens per side without eos; all must fit max(lengths).
      lengths: ascending bucket lengths.

    Returns:
      int [N] bucket indices.
    """
    need = np.maximum(src_lengths, tgt_lengths) + 1
    return np.searchsorted(np.asarray(lengths), need, side="left")


def local_batches_per_bucket(buckets: np.ndarray, rows: tuple[int, ...]) -> tuple[int, ...]:
    """Returns how many batches each bucket fills on this host in one epoch (last one partial)."""
    counts = np.bincount(buckets, minlength=len(rows))
    return tuple(int(math.ceil(c / r)) for c, r in zip(counts, rows, strict=True))


def plan_bucketed_epoch(
    buckets: np.ndarray,
    rows: tuple[int, ...],
    batches_per_bucket: tuple[int, ...],
    seed: int,
    epoch: int,
) -> list[tuple[int, np.ndarray]]:
    """Plans one epoch of bucketed batches.

    Args:
      buckets: int [N] bucket of each pair (from `assign_buckets`).
      rows: host-local rows per bucket.
      batches_per_bucket: batches of each bucket per epoch, the same on all hosts (at least the
        local need; extra batches or rows are padding, -1).
      seed: shuffle seed.
      epoch: epoch number; each epoch has its own shuffle.

    Returns:
      The epoch's batches in order: (bucket index, int64 [rows] pair indices, -1 = empty row).
    """
    order = np.random.default_rng([seed, epoch, 0]).permutation(len(buckets))
    batches = []
    for b, (num_rows, num_batches) in enumerate(zip(rows, batches_per_bucket, strict=True)):
        members = order[buckets[order] == b]
        if len(members) > num_rows * num_batches:
            raise ValueError(
                f"bucket {b} has {len(members)} pairs, more than {num_batches} "
                f"batches of {num_rows} rows; batches_per_bucket is too small."
            )
        slots = np.full(num_rows * num_batches, -1, np.int64)
        slots[: len(members)] = members
        batches += [(b, slots[i * num_rows : (i + 1) * num_rows]) for i in range(num_batches)]
    # The bucket order comes from a host-independent seed: every host has the same shapes.
    schedule = np.random.default_rng([seed, epoch, 1]).permutation(len(batches))
    return [batches[i] for i in schedule]


@dataclasses.dataclass(frozen=True)
class PackedEpoch:
    """Where each pair of one epoch sits in packed rows, sorted by row.

    Attributes:
      examples: int64 [K] pair indices.
      rows: int64 [K] epoch-global row of each pair.
      src_starts, tgt_starts: int64 [K] first column of each pair's source / target.
      segments: int64 [K] segment id within the row (1, 2, ...).
      num_rows: rows in the epoch.
    """

    examples: np.ndarray
    rows: np.ndarray
    src_starts: np.ndarray
    tgt_starts: np.ndarray
    segments: np.ndarray
    num_rows: int


def plan_packed_epoch(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    length: int,
    seed: int,
    epoch: int,
    open_rows: int = 8,
) -> PackedEpoch:
    """Packs the shuffled pairs of one epoch into rows of `length` tokens per side.

    First fit over the last `open_rows` rows still open: a pair goes into the first open row
    where both sides fit, else into a new row (closing the oldest row if too many are open).

    Args:
      src_lengths, tgt_lengths: int [N] tokens per side without eos; each + 1 <= length.
      length: row length (max_len).
      seed: shuffle seed.
      epoch: epoch number.
      open_rows: how many rows stay open for later pairs (more: fuller rows, slower).

    Returns:
      The placement of every pair (each exactly once).
    """
    n = len(src_lengths)
    order = np.random.default_rng([seed, epoch, 0]).permutation(n)
    src_need = (np.asarray(src_lengths) + 1).tolist()
    tgt_need = (np.asarray(tgt_lengths) + 1).tolist()
    placed = np.empty((n, 4), np.int64)  # row, src start, tgt start, segment
    open_: list[list[int]] = []  # [row, src used, tgt used, segments]
    next_row = 0
    for k, e in enumerate(order.tolist()):
        s, t = src_need[e], tgt_need[e]
        for slot in open_:
            if slot[1] + s <= length and slot[2] + t <= length:
                break
        else:
            if len(open_) == open_rows:
                open_.pop(0)
            slot = [next_row, 0, 0, 0]
            next_row += 1
            open_.append(slot)
        placed[k] = slot[0], slot[1], slot[2], slot[3] + 1
        slot[1] += s
        slot[2] += t
        slot[3] += 1
    by_row = np.argsort(placed[:, 0], kind="stable")
    placed = placed[by_row]
    return PackedEpoch(
        order[by_row], placed[:, 0], placed[:, 1], placed[:, 2], placed[:, 3], next_row
    )
