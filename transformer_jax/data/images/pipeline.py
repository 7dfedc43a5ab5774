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

import ml_collections
import numpy as np

from transformer_jax.data.epochs import EpochIterator
from transformer_jax.data.hosts import resolve_processes
from transformer_jax.data.images import idx
from transformer_jax.data.images.augment import augment_batch
from transformer_jax.data.images.config import IDX_FILE_FIELDS, idx_folder, idx_label_names
from transformer_jax.data.images.digits import digits_dataset
from transformer_jax.data.images.examples import ImageSplit, ImageSplits
from transformer_jax.data.images.folder import folder_dataset
from transformer_jax.data.images.tfds_source import tfds_image_dataset
from transformer_jax.data.labelled_batches import (
    LabelledBatches,
    check_enough,
    check_rows,
    every_example_once,
    shuffled_epoch,
)


def load_image_dataset(cfg: ml_collections.ConfigDict) -> ImageSplits:
    """The configured source's labelled splits."""
    if cfg.source == "digits":
        return digits_dataset(cfg.digits_seed, cfg.digits_eval, cfg.digits_test)
    if cfg.source == "tfds":
        return tfds_image_dataset(cfg)
    if cfg.source == "idx":
        return idx.idx_dataset(idx_files(cfg), idx_label_names(cfg), cfg.idx_eval, cfg.idx_seed)
    return folder_dataset(
        cfg.folder_train, cfg.folder_eval, cfg.folder_test, cfg.folder_size, cfg.folder_channels
    )


def idx_files(cfg: ml_collections.ConfigDict) -> dict[str, str | None]:
    """Each IDX role -> the file data.idx_* gives, else data.idx_dir's (or Debian's) file."""
    given = {field.removeprefix("idx_"): cfg[field] for field in IDX_FILE_FIELDS}
    return idx.idx_paths(idx_folder(cfg), given)


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """The augmentation of one epoch's batches; batch i draws from (seed, epoch, i)."""

    seed: int
    epoch: int
    max_shift: int
    flip: bool
    max_degrees: float = 0.0
    max_scale: float = 0.0

    def __call__(self, batch: dict[str, np.ndarray], batch_index: int) -> dict[str, np.ndarray]:
        """The batch with its `images` [B, H, W, C] augmented (see `augment_batch`)."""
        rng = np.random.default_rng([self.seed, self.epoch, batch_index])
        images = augment_batch(
            batch["images"], self.max_shift, self.flip, rng, self.max_degrees, self.max_scale
        )
        return {**batch, "images": images}


def fingerprint(split: ImageSplit, cfg: ml_collections.ConfigDict) -> str:
    """A short hash of the images, labels and every setting that shapes training batches.

    The process layout is left out: the global batches do not depend on it, so a run may resume
    on another number of hosts.
    """
    digest = hashlib.sha256(np.ascontiguousarray(split.images).data)
    digest.update(np.ascontiguousarray(split.labels).data)
    digest.update(str(split.images.shape).encode())
    settings = (cfg.batch_size, cfg.shuffle_seed, cfg.random_shift, cfg.random_flip)
    if cfg.random_rotate or cfg.random_scale:  # Absent before these existed: same fingerprint.
        settings += (float(cfg.random_rotate), float(cfg.random_scale))
    if cfg.random_shift_from_epoch:
        settings += (f"shift_from_epoch={cfg.random_shift_from_epoch}",)
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
        check_enough(len(split), cfg.batch_size, "images")
        self._split, self._rows, self._seed = split, cfg.batch_size, cfg.shuffle_seed
        self._shift, self._flip = cfg.random_shift, cfg.random_flip
        self._shift_from = cfg.random_shift_from_epoch
        self._degrees, self._scale = float(cfg.random_rotate), float(cfg.random_scale)
        self._hosts = resolve_processes(process_index, process_count)
        check_rows("batch_size", cfg.batch_size, self._hosts)
        super().__init__(self.epoch_batches, fingerprint(split, cfg), num_workers=cfg.num_workers)

    def epoch_batches(self, epoch: int) -> LabelledBatches:
        """Epoch `epoch`'s full batches, from a permutation drawn from (shuffle_seed, epoch).

        Epochs before `random_shift_from_epoch` are not shifted; later ones are augmented as
        they would be without it.
        """
        augment = None
        shift = self._shift if epoch >= self._shift_from else 0  # Clean epochs first.
        if shift or self._flip or self._degrees or self._scale:
            augment = Augmentation(self._seed, epoch, shift, self._flip, self._degrees, self._scale)
        arrays = {"images": self._split.images, "labels": self._split.labels}
        return shuffled_epoch(arrays, self._seed, epoch, self._rows, self._hosts, augment)


def image_eval_batches(
    split: ImageSplit,
    cfg: ml_collections.ConfigDict,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> list[dict[str, np.ndarray]]:
    """Every image once, in order, the last batch padded with zero-weight rows; no augmentation."""
    hosts = resolve_processes(process_index, process_count)
    arrays = {"images": split.images, "labels": split.labels}
    return every_example_once(arrays, cfg.eval_batch_size, hosts)


def log_split(name: str, split: ImageSplit) -> None:
    """Logs a split's size and image shape."""
    logging.info("%s: %d images of shape %s", name, len(split), split.image_shape)
