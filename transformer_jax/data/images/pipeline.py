"""What the image-classification task calls: the labelled splits and their batches.

    dataset = load_image_dataset(cfg)                              # ImageSplits
    train_iter = ImageTrainIterator(dataset.splits["train"], cfg)  # host-local, infinite, resumable
    batches = image_eval_batches(dataset.splits["eval"], cfg)      # every image once

A batch holds `images` (float32 [B, H, W, C] in [0, 1]), `labels` (int32 [B]) and `weights`
(float32 [B]: 0 for the padding rows of an evaluation split's last batch). Training batches are
built and augmented whole (the global batch, from (shuffle_seed, epoch, batch index)) and only
then cut into this host's rows, so they do not depend on the number of hosts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Sequence

import ml_collections
import numpy as np

from transformer_jax.data.epochs import EpochIterator, shard_rows
from transformer_jax.data.hosts import resolve_processes
from transformer_jax.data.images.augment import augment_batch
from transformer_jax.data.images.digits import digits_dataset
from transformer_jax.data.images.examples import ImageSplit, ImageSplits
from transformer_jax.data.images.folder import folder_dataset
from transformer_jax.data.images.tfds_source import tfds_image_dataset


def load_image_dataset(cfg: ml_collections.ConfigDict) -> ImageSplits:
    """The configured source's labelled splits."""
    if cfg.source == "digits":
        return digits_dataset(cfg.digits_seed, cfg.digits_eval, cfg.digits_test)
    if cfg.source == "tfds":
        return tfds_image_dataset(cfg)
    return folder_dataset(
        cfg.folder_train, cfg.folder_eval, cfg.folder_test, cfg.folder_size, cfg.folder_channels
    )


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """The augmentation of one epoch's batches; batch i draws from (seed, epoch, i)."""

    seed: int
    epoch: int
    max_shift: int
    flip: bool

    def __call__(self, images: np.ndarray, batch_index: int) -> np.ndarray:
        """[B, H, W, C] -> [B, H, W, C]."""
        rng = np.random.default_rng([self.seed, self.epoch, batch_index])
        return augment_batch(images, self.max_shift, self.flip, rng)


class ImageBatches(Sequence):
    """Batches of `rows` images in `order` (the last one padded if `pad_last`), host rows."""

    def __init__(
        self,
        split: ImageSplit,
        order: np.ndarray,
        rows: int,
        pad_last: bool,
        hosts: tuple[int, int] = (0, 1),
        augment: Augmentation | None = None,
    ):
        self._split, self._order, self._rows, self._hosts = split, order, rows, hosts
        self._augment = augment
        self._len = -(-len(order) // rows) if pad_last else len(order) // rows

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if not 0 <= i < self._len:
            raise IndexError(i)
        index = self._order[i * self._rows : (i + 1) * self._rows]
        n, split = len(index), self._split
        batch = {
            "images": np.zeros((self._rows, *split.image_shape), np.float32),
            "labels": np.zeros(self._rows, np.int32),
            "weights": np.zeros(self._rows, np.float32),
        }
        batch["images"][:n], batch["labels"][:n], batch["weights"][:n] = (
            split.images[index],
            split.labels[index],
            1.0,
        )
        if self._augment is not None:
            batch["images"] = self._augment(batch["images"], i)
        return shard_rows(batch, *self._hosts)


def _check_rows(field: str, rows: int, hosts: tuple[int, int]) -> None:
    if rows % hosts[1]:
        raise ValueError(
            f"data config field '{field}': {rows} rows do not split over {hosts[1]} "
            f"processes. Use a multiple of {hosts[1]}."
        )


def fingerprint(split: ImageSplit, cfg: ml_collections.ConfigDict) -> str:
    """A short hash of the images, labels and every setting that shapes training batches.

    The process layout is left out: the global batches do not depend on it, so a run may resume
    on another number of hosts.
    """
    digest = hashlib.sha256(np.ascontiguousarray(split.images).data)
    digest.update(np.ascontiguousarray(split.labels).data)
    digest.update(str(split.images.shape).encode())
    settings = (cfg.batch_size, cfg.shuffle_seed, cfg.random_shift, cfg.random_flip)
    digest.update("/".join(map(str, settings)).encode())
    return digest.hexdigest()[:16]


class ImageTrainIterator(EpochIterator):
    """Infinite host-local training batches, reshuffled and re-augmented each epoch."""

    def __init__(
        self,
        split: ImageSplit,
        cfg: ml_collections.ConfigDict,
        *,
        process_index: int | None = None,
        process_count: int | None = None,
    ):
        if len(split) < cfg.batch_size:
            raise ValueError(
                f"The training split has {len(split)} images, fewer than one batch of "
                f"{cfg.batch_size}. Lower data.batch_size or add images."
            )
        self._split, self._rows, self._seed = split, cfg.batch_size, cfg.shuffle_seed
        self._shift, self._flip = cfg.random_shift, cfg.random_flip
        self._hosts = resolve_processes(process_index, process_count)
        _check_rows("batch_size", cfg.batch_size, self._hosts)
        super().__init__(self.epoch_batches, fingerprint(split, cfg), num_workers=cfg.num_workers)

    def epoch_batches(self, epoch: int) -> ImageBatches:
        """Epoch `epoch`'s full batches, from a permutation drawn from (shuffle_seed, epoch)."""
        order = np.random.default_rng([self._seed, epoch]).permutation(len(self._split))
        augment = None
        if self._shift or self._flip:
            augment = Augmentation(self._seed, epoch, self._shift, self._flip)
        return ImageBatches(self._split, order, self._rows, False, self._hosts, augment)


def image_eval_batches(
    split: ImageSplit,
    cfg: ml_collections.ConfigDict,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> list[dict[str, np.ndarray]]:
    """Every image once, in order, the last batch padded with zero-weight rows; no augmentation."""
    hosts = resolve_processes(process_index, process_count)
    _check_rows("eval_batch_size", cfg.eval_batch_size, hosts)
    return list(ImageBatches(split, np.arange(len(split)), cfg.eval_batch_size, True, hosts))


def log_split(name: str, split: ImageSplit) -> None:
    """Logs a split's size and image shape."""
    logging.info("%s: %d images of shape %s", name, len(split), split.image_shape)
