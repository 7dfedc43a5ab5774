"""The infinite, checkpointable training iterator over translation pairs.

Each epoch's plan (see planning.py) is a random-access list of batches; `EpochIterator`
(data/epochs.py) serves it with background threads and makes the position resumable.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np

from transformer_jax.data.epochs import EpochIterator
from transformer_jax.data.translation import batching, planning
from transformer_jax.data.translation.tokenized import TokenizedPairs


class EpochBatches:
    """The batches of one epoch as a random-access sequence (a grain data source)."""

    def __init__(
        self,
        data: TokenizedPairs,
        lengths: tuple[int, ...],
        rows: tuple[int, ...],
        pack: bool,
        seed: int,
        epoch: int,
        buckets: np.ndarray | None,
        batches_per_bucket: tuple[int, ...] | None,
        ids: batching.SpecialIds = batching.PROJECT_IDS,
    ):
        self._data, self._lengths, self._rows, self._pack = data, lengths, rows, pack
        self._ids = ids
        if pack:
            self._packed = planning.plan_packed_epoch(
                data.src_lengths, data.tgt_lengths, lengths[-1], seed, epoch
            )
            self._num_batches = math.ceil(self._packed.num_rows / rows[-1])
            # First pair of each batch in the row-sorted placement.
            self._bounds = np.searchsorted(
                self._packed.rows, np.arange(self._num_batches + 1) * rows[-1]
            )
        else:
            self._bucketed = planning.plan_bucketed_epoch(
                buckets, rows, batches_per_bucket, seed, epoch
            )
            self._num_batches = len(self._bucketed)

    def __len__(self) -> int:
        return self._num_batches

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if not 0 <= i < self._num_batches:
            raise IndexError(f"batch {i} of an epoch of {self._num_batches}")
        if not self._pack:
            bucket, examples = self._bucketed[i]
            return batching.padded_batch(self._data, examples, self._lengths[bucket], ids=self._ids)
        p, num_rows = self._packed, self._rows[-1]
        sl = slice(self._bounds[i], self._bounds[i + 1])
        return batching.build_batch(
            self._data,
            p.examples[sl],
            p.rows[sl] - i * num_rows,
            p.src_starts[sl],
            p.tgt_starts[sl],
            p.segments[sl],
            num_rows,
            self._lengths[-1],
            self._lengths[-1],
            packed=True,
            ids=self._ids,
        )


class TrainIterator(EpochIterator):
    """Yields host-local training batch dicts forever, a fresh shuffle each epoch.

    Attributes:
      lengths: the padded lengths batches can have (one per bucket; packed: max_len only).
      rows: host-local rows per bucket (packed: rows per batch).
      num_pairs: training pairs on this host after the length filter.
      num_dropped: pairs this host dropped for being longer than max_len.
      batches_per_bucket: batches of each bucket per epoch (bucketed mode), same on all hosts.
    """

    def __init__(
        self,
        data: TokenizedPairs,
        *,
        lengths: tuple[int, ...],
        rows: tuple[int, ...],
        pack: bool,
        seed: int,
        num_workers: int = 0,
        batches_per_bucket: tuple[int, ...] | None = None,
        num_dropped: int = 0,
        layout: str = "",
        ids: batching.SpecialIds = batching.PROJECT_IDS,
    ):
        """Sets up the iterator at the start of epoch 0.

        Args:
          data: this host's tokenized training pairs, all fitting max(lengths).
          lengths: bucket lengths (packed: a single length, max_len).
          rows: host-local rows per bucket (packed: a single row count).
          pack: pack several pairs per row.
          seed: shuffle seed.
          num_workers: grain worker processes (0: threads in this process).
          batches_per_bucket: batches per bucket and epoch agreed across hosts (bucketed mode);
            None = this host's own need.
          num_dropped: how many pairs the length filter dropped (reported only).
          layout: description of the host layout, part of the state's fingerprint.
          ids: the tokenizer's pad, bos and eos ids, which the batches are laid out with.
        """
        if len(data) == 0:
            raise ValueError(
                "No training pairs left on this host after the length filter "
                f"({num_dropped} dropped): raise max_len or check the data."
            )
        self.lengths, self.rows = lengths, rows
        self.num_pairs, self.num_dropped = len(data), num_dropped
        self._data, self._pack, self._seed, self._ids = data, pack, seed, ids
        self._buckets = None
        self.batches_per_bucket = None
        if not pack:
            self._buckets = planning.assign_buckets(data.src_lengths, data.tgt_lengths, lengths)
            local = planning.local_batches_per_bucket(self._buckets, rows)
            agreed = tuple(batches_per_bucket) if batches_per_bucket is not None else local
            if any(a < b for a, b in zip(agreed, local, strict=True)):
                raise ValueError(f"batches_per_bucket={agreed} is below this host's need {local}.")
            self.batches_per_bucket = agreed
        digest = hashlib.sha256(
            json.dumps([lengths, rows, pack, seed, self.batches_per_bucket, layout]).encode()
        )
        # Lengths decide the plan; the first ids tell tokenizers apart.
        for array in (
            data.src_offsets,
            data.tgt_offsets,
            data.src_ids[: 1 << 20],
            data.tgt_ids[: 1 << 20],
        ):
            digest.update(np.ascontiguousarray(array).tobytes())
        super().__init__(self.epoch_batches, digest.hexdigest()[:16], num_workers=num_workers)

    def epoch_batches(self, epoch: int) -> EpochBatches:
        """Returns the batches of `epoch` as a random-access sequence (no threads, no state)."""
        return EpochBatches(
            self._data,
            self.lengths,
            self.rows,
            self._pack,
            self._seed,
            epoch,
            self._buckets,
            self.batches_per_bucket,
            self._ids,
        )
