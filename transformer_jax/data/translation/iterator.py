"""The infinite, checkpointable training iterator: one grain dataset per epoch.

Each epoch's plan (see planning.py) is a random-access list of batches, served by
`grain.MapDataset` with background threads (or worker processes) building batches ahead.
The state is (epoch, batches taken in the epoch) plus a fingerprint of everything that shapes the
plan: restoring it slices the epoch's dataset at that batch, so a restarted run sees exactly
the batches it would have seen, whatever `num_workers` was before.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import grain
import numpy as np

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
    ):
        self._data, self._lengths, self._rows, self._pack = data, lengths, rows, pack
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
            return batching.padded_batch(self._data, examples, self._lengths[bucket])
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
        )


class TrainIterator:
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
        """
        if len(data) == 0:
            raise ValueError(
                "No training pairs left on this host after the length filter "
                f"({num_dropped} dropped): raise max_len or check the data."
            )
        self.lengths, self.rows = lengths, rows
        self.num_pairs, self.num_dropped = len(data), num_dropped
        self._data, self._pack, self._seed, self._num_workers = data, pack, seed, num_workers
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
        self._fingerprint = digest.hexdigest()[:16]
        self._start(0, 0)

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
        )

    def _start(self, epoch: int, batch: int) -> None:
        source = self.epoch_batches(epoch)
        if batch > len(source):
            raise ValueError(
                f"Iterator state has batch_in_epoch={batch}, but epoch {epoch} has "
                f"only {len(source)} batches. Pass a state from get_state()."
            )
        self._epoch, self._batch, self._source = epoch, batch, source
        dataset = grain.MapDataset.source(source)[batch:]
        iter_dataset = dataset.to_iter_dataset(
            grain.ReadOptions(num_threads=2, prefetch_buffer_size=4)
        )
        if self._num_workers > 0:
            from absl import flags

            if not flags.FLAGS.is_parsed():  # grain's workers read absl flags; use defaults.
                flags.FLAGS.mark_as_parsed()
            iter_dataset = iter_dataset.mp_prefetch(
                grain.MultiprocessingOptions(num_workers=self._num_workers)
            )
        self._inner = iter(iter_dataset)

    @property
    def epoch(self) -> int:
        """The epoch the next batch comes from (or the one just finished)."""
        return self._epoch

    @property
    def batches_in_epoch(self) -> int:
        """Number of batches in the current epoch (varies with the shuffle when packing)."""
        return len(self._source)

    def __iter__(self) -> TrainIterator:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        if self._batch >= len(self._source):
            self._start(self._epoch + 1, 0)
        batch = next(self._inner)
        self._batch += 1
        return batch

    def get_state(self) -> dict[str, Any]:
        """Returns the position as a JSON-serialisable dict (for Orbax JsonSave)."""
        return {
            "epoch": self._epoch,
            "batch_in_epoch": self._batch,
            "fingerprint": self._fingerprint,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Moves to a position from `get_state` (of an iterator over the same data and config).

        Raises:
          ValueError: the state is malformed or came from different data, config or hosts.
        """
        try:
            epoch, batch, fingerprint = (
                state["epoch"],
                state["batch_in_epoch"],
                state["fingerprint"],
            )
        except (KeyError, TypeError):
            raise ValueError(
                f"Iterator state {state!r} lacks epoch/batch_in_epoch/fingerprint; "
                f"pass a dict from TrainIterator.get_state()."
            ) from None
        if fingerprint != self._fingerprint:
            raise ValueError(
                f"Iterator state fingerprint {fingerprint!r} != {self._fingerprint!r}: it was "
                f"saved over other training data, tokenizer, batch config, seed or process "
                f"layout. Restore with the config and workdir of the saved run."
            )
        if not (isinstance(epoch, int) and isinstance(batch, int) and epoch >= 0 <= batch):
            raise ValueError(
                f"Iterator state has epoch={epoch!r}, batch_in_epoch={batch!r}: "
                f"not a position. Pass a state from get_state()."
            )
        self._start(epoch, batch)
