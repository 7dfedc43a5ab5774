"""An infinite, checkpointable iterator over epochs of batches: what every task's input shares.

A task describes epoch `e` as a random-access sequence of batches (its shuffle is a function of
the seed and `e`); this class serves it through `grain.MapDataset` with background threads (or
worker processes) building batches ahead. The state is (epoch, batches taken in the epoch) plus
a fingerprint of everything that shapes the batches: restoring it slices the epoch's dataset at
that batch, so a restarted run sees exactly the batches it would have seen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grain
import numpy as np

Batch = dict[str, np.ndarray]


class EpochIterator:
    """Yields host-local batch dicts forever: epoch 0, then epoch 1, ... each from `epoch_fn`."""

    def __init__(
        self,
        epoch_fn: Callable[[int], Sequence[Batch]],
        fingerprint: str,
        *,
        num_workers: int = 0,
    ):
        """Sets up the iterator at the start of epoch 0.

        Args:
          epoch_fn: epoch -> its batches as a random-access sequence (deterministic).
          fingerprint: a short hash of the data and settings the batches depend on; a state
            saved with another fingerprint is refused.
          num_workers: grain worker processes (0: threads in this process).
        """
        self._epoch_fn, self._fingerprint, self._num_workers = epoch_fn, fingerprint, num_workers
        self._start(0, 0)

    def _start(self, epoch: int, batch: int) -> None:
        source = self._epoch_fn(epoch)
        if len(source) == 0:
            raise ValueError(f"Epoch {epoch} has no batches: the training data is empty.")
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
        """Number of batches in the current epoch (may vary with the shuffle)."""
        return len(self._source)

    def __iter__(self) -> EpochIterator:
        return self

    def __next__(self) -> Batch:
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
                f"pass a dict from get_state()."
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


def shard_rows(batch: Batch, process_index: int, process_count: int) -> Batch:
    """This host's equal slice of the rows of a global batch (rows divisible by hosts)."""
    rows = next(iter(batch.values())).shape[0] // process_count
    return {k: v[process_index * rows : (process_index + 1) * rows] for k, v in batch.items()}
