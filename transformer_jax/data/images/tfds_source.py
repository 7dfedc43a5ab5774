"""Labelled images from a TFDS dataset (e.g. "mnist", "cifar10"), read without TensorFlow.

Records hold a uint8 image [H, W, C] (or [H, W]) and an integer label; every image of the
three splits must have the same shape. Class names come from the dataset's ClassLabel feature
when TFDS knows it, else they are "0", "1", ... up to the largest label seen.
"""

from __future__ import annotations

from typing import Any

import ml_collections
import numpy as np

from transformer_jax.data.images.examples import ImageSplit, ImageSplits, empty_split
from transformer_jax.data.tfds_io import READ_CHUNK, open_tfds_split, read_records


def record_image(record: dict, key: str, where: str) -> np.ndarray:
    """A record's image as uint8 [H, W, C] (a [H, W] image gets C = 1)."""
    image = np.asarray(record[key])
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.dtype != np.uint8:
        raise ValueError(
            f"{where}: field {key!r} is {image.dtype} {image.shape}, not a uint8 image "
            f"[H, W] or [H, W, C]. Set data.tfds_image_key to the record's image field."
        )
    return image


def _read_split(source, cfg: ml_collections.ConfigDict, where: str) -> tuple[np.ndarray, ...]:
    """(uint8 images [N, H, W, C], int64 labels [N]) of an opened split, in record order."""
    images, labels = [], []
    for start in range(0, len(source), READ_CHUNK):
        records = read_records(source, list(range(start, min(start + READ_CHUNK, len(source)))))
        for offset, record in enumerate(records):
            at = f"{where}, record {start + offset}"
            missing = [k for k in (cfg.tfds_image_key, cfg.tfds_label_key) if k not in record]
            if missing:
                raise ValueError(
                    f"{at}: no field {missing[0]!r}; the records have {sorted(record)}. Set "
                    f"data.tfds_image_key / data.tfds_label_key to one of them."
                )
            image = record_image(record, cfg.tfds_image_key, at)
            if images and image.shape != images[0].shape:
                raise ValueError(
                    f"{at}: image of shape {image.shape}, but record 0 has {images[0].shape}. "
                    f"This source needs images of one size: pick a dataset (or config) whose "
                    f"images all have one shape, or export them to folders and use "
                    f"data.source='folder' with data.folder_size."
                )
            label = np.asarray(record[cfg.tfds_label_key])
            if label.ndim or not np.issubdtype(label.dtype, np.integer):
                raise ValueError(
                    f"{at}: field {cfg.tfds_label_key!r} is {label.dtype} {label.shape}, not "
                    f"one integer class. Set data.tfds_label_key to the record's class field."
                )
            images.append(image)
            labels.append(int(label))
    if not images:
        raise ValueError(f"{where}: no records. Check the split name in the config.")
    return np.stack(images), np.asarray(labels, np.int64)


def _builder_features(name: str, data_dir: str | None) -> Any:
    """The dataset's features as its TFDS builder describes them (no record read), or None."""
    import tensorflow_datasets as tfds  # Imported here: slow to import, only this source needs it.

    try:
        return tfds.builder(name, data_dir=data_dir).info.features
    except Exception:  # Unknown builder, or one that needs TensorFlow to describe itself.
        return None


def builder_label_names(name: str, data_dir: str | None, label_key: str) -> tuple[str, ...] | None:
    """The names of the dataset's ClassLabel feature `label_key`, or None when TFDS lacks them."""
    try:
        names = _builder_features(name, data_dir)[label_key].names
    except Exception:  # No features, no such feature, not a ClassLabel: fall back to ints.
        return None
    return tuple(str(n) for n in names) or None


def builder_image_values(cfg: ml_collections.ConfigDict) -> dict[str, int]:
    """What the TFDS builder's metadata tells of the images without reading one: any of
    num_classes (a ClassLabel's), image_height, image_width and channels (a fixed image
    shape's; [H, W] has one channel); those it does not tell are left out."""
    features = _builder_features(cfg.tfds_name, cfg.tfds_data_dir)
    values = {}
    try:
        values["num_classes"] = int(features[cfg.tfds_label_key].num_classes)
    except Exception:  # No features, no such feature, not a ClassLabel.
        pass
    try:
        shape = tuple(features[cfg.tfds_image_key].shape)
    except Exception:
        shape = ()
    if len(shape) == 2:
        shape += (1,)
    if len(shape) == 3 and all(isinstance(n, int) for n in shape):
        values["image_height"], values["image_width"], values["channels"] = shape
    return values


def tfds_image_dataset(cfg: ml_collections.ConfigDict) -> ImageSplits:
    """The configured TFDS dataset's train / eval / test images (test empty when unset).

    Returns:
      ImageSplits with images float32 [N, H, W, C] (uint8 pixels / 255) and int32 labels.
    """
    names = {
        "train": cfg.tfds_train_split,
        "eval": cfg.tfds_eval_split,
        "test": cfg.tfds_test_split,
    }
    raw = {}
    for split, tfds_split in names.items():
        if not tfds_split:
            continue
        source = open_tfds_split(cfg.tfds_name, tfds_split, cfg.tfds_data_dir, cfg.tfds_download)
        raw[split] = _read_split(source, cfg, f"TFDS {cfg.tfds_name!r} split {tfds_split!r}")
    shape = raw["train"][0].shape[1:]
    for split, (images, _) in raw.items():
        if images.shape[1:] != shape:
            raise ValueError(
                f"TFDS {cfg.tfds_name!r}: {split} split {names[split]!r} has images of shape "
                f"{images.shape[1:]}, but the training split {names['train']!r} has {shape}. "
                f"Use splits of one dataset configuration."
            )
    label_names = builder_label_names(cfg.tfds_name, cfg.tfds_data_dir, cfg.tfds_label_key)
    if label_names is None:
        top = max(int(labels.max()) for _, labels in raw.values())
        label_names = tuple(str(i) for i in range(top + 1))
    splits = {
        split: ImageSplit(images.astype(np.float32) / np.float32(255), labels.astype(np.int32))
        for split, (images, labels) in raw.items()
    }
    splits.setdefault("test", empty_split(shape))
    return ImageSplits(label_names, splits)
