"""Batches of labelled examples held as arrays: what text and image classification share.

A split is a dict of per-example arrays of one length N (e.g. `inputs` int32 [N, T] and
`labels` int32 [N], or `images` float32 [N, H, W, C] and `labels`). A batch takes `rows` of them
in a given order, adds `weights` (float32 [rows]: 1 for an example, 0 for a padding row of a
split's last batch), optionally transforms the whole batch (augmentation, drawn from the batch
index), and keeps this host's rows. Training epochs are permutations drawn from (seed, epoch),
so a batch depends on neither the number of hosts nor the order batches are built in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from transformer_jax.data.epochs import Batch, shard_rows

Transform = Callable[[Batch, int], Batch]  # (global batch, batch index) -> global batch


class LabelledBatches(Sequence):
    """Batches of `rows` examples of `arrays` in `order` (the last one padded if `pad_last`,
    else dropped when short), this host's rows of each."""

    def __init__(
        self,
        arrays: Mapping[str, np.ndarray],
        order: np.ndarray,
        rows: int,
        *,
        pad_last: bool,
        hosts: tuple[int, int] = (0, 1),
        transform: Transform | None = None,
    ):
        self._arrays, self._order, self._rows, self._hosts = dict(arrays), order, rows, hosts
        self._transform = transform
        self._len = -(-len(order) // rows) if pad_last else len(order) // rows

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> Batch:
        if not 0 <= i < self._len:
            raise IndexError(i)
        index = self._order[i * self._rows : (i + 1) * self._rows]
        batch = {}
        for name, values in self._arrays.items():
            batch[name] = np.zeros((self._rows, *values.shape[1:]), values.dtype)
            batch[name][: len(index)] = values[index]
        batch["weights"] = np.zeros(self._rows, np.float32)
        batch["weights"][: len(index)] = 1.0
        if self._transform is not None:
            batch = self._transform(batch, i)
        return shard_rows(batch, *self._hosts)


def check_rows(field: str, rows: int, hosts: tuple[int, int]) -> None:
    """Raises unless the data config's `field` (a batch's rows) splits evenly over the hosts."""
    if rows % hosts[1]:
        raise ValueError(
            f"data config field '{field}': {rows} rows do not split over {hosts[1]} "
            f"processes. Use a multiple of {hosts[1]}."
        )


def check_enough(count: int, rows: int, noun: str) -> None:
    """Raises when a training split holds fewer than one batch of `rows` examples."""
    if count < rows:
        raise ValueError(
            f"The training split has {count} {noun}, fewer than one batch of {rows}. Lower "
            f"data.batch_size or add {noun}."
        )


def shuffled_epoch(
    arrays: Mapping[str, np.ndarray],
    seed: int,
    epoch: int,
    rows: int,
    hosts: tuple[int, int],
    transform: Transform | None = None,
) -> LabelledBatches:
    """Epoch `epoch`'s full batches, in a permutation drawn from (seed, epoch)."""
    count = len(next(iter(arrays.values())))
    order = np.random.default_rng([seed, epoch]).permutation(count)
    return LabelledBatches(arrays, order, rows, pad_last=False, hosts=hosts, transform=transform)


def every_example_once(
    arrays: Mapping[str, np.ndarray], rows: int, hosts: tuple[int, int]
) -> list[Batch]:
    """Every example once, in order, the last batch padded with zero-weight rows."""
    check_rows("eval_batch_size", rows, hosts)
    count = len(next(iter(arrays.values())))
    return list(LabelledBatches(arrays, np.arange(count), rows, pad_last=True, hosts=hosts))
