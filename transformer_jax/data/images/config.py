"""Image-classification input's configuration: which images, how many per step, what augmentation.

Sources: "digits" (scikit-learn's 1,797 8x8 handwritten digits, offline), "tfds" (a TFDS image
dataset such as "mnist", prepared as ArrayRecord), "folder" (own files, `ROOT/<class>/<file>`),
or "idx" (MNIST-style IDX files, such as Fashion-MNIST's).
"""

from __future__ import annotations

import ml_collections
from ml_collections.config_dict import placeholder

from transformer_jax import storage
from transformer_jax.data.config_checks import (
    absolute_paths,
    check_batching,
    check_choice,
    check_int,
    check_missing,
    check_optional_file,
    fail,
)
from transformer_jax.data.images import idx

SOURCES = ("digits", "tfds", "folder", "idx")
IDX_FILE_FIELDS = tuple(f"idx_{role}" for role in idx.FILE_NAMES)
PATH_FIELDS = ("tfds_data_dir", "folder_train", "folder_eval", "folder_test", "idx_dir")
PATH_FIELDS += IDX_FILE_FIELDS
DIGITS_TOTAL = 1797  # Images in sklearn.datasets.load_digits().


def default_image_data_config() -> ml_collections.ConfigDict:
    """Returns the default image data configuration (the embedded 8x8 digits)."""
    c = ml_collections.ConfigDict()
    c.source = "digits"  # "digits", "tfds" or "folder".

    # --- digits: 1,797 8x8 grayscale digits, split stratified by class; the rest (1,257) train.
    c.digits_seed = 0  # Seed of the split.
    c.digits_eval = 180  # Validation images.
    c.digits_test = 360  # Test images.

    # --- tfds: an image dataset prepared as ArrayRecord (records: uint8 [H, W(, C)], int label).
    c.tfds_name = placeholder(str)  # E.g. "mnist" or "cifar10".
    c.tfds_data_dir = placeholder(str)  # TFDS data directory; unset = the TFDS default.
    c.tfds_download = False  # Whether TFDS may download and prepare the dataset first.
    c.tfds_train_split = "train[:90%]"  # Training split (TFDS split syntax).
    c.tfds_eval_split = "train[90%:]"  # Validation split.
    c.tfds_test_split = "test"  # Test split; '' = no final test.
    c.tfds_image_key = "image"  # Record field holding the image.
    c.tfds_label_key = "label"  # Record field holding the class index.

    # --- folder: own image files, ROOT/<class>/<file> (png, jpg, jpeg, bmp, gif, webp).
    c.folder_train = placeholder(str)  # Training root; its subfolders (sorted) are the classes.
    c.folder_eval = placeholder(str)  # Validation root (picks the best checkpoint).
    c.folder_test = placeholder(str)  # Test root; unset = no final test.
    c.folder_size = placeholder(int)  # Resize every image to this square; unset = keep (all equal).
    c.folder_channels = 1  # 1 = grayscale, 3 = RGB (every image is converted).

    # --- idx: MNIST-style IDX files (gzip or not), e.g. Fashion-MNIST's.
    # Unset idx_dir and files: Debian's /usr/share/datasets/fashion-mnist (when installed).
    c.idx_dir = placeholder(str)  # Folder of the 4 files (original names, .gz or not).
    c.idx_train_images = placeholder(str)  # A file for train-images-idx3-ubyte.
    c.idx_train_labels = placeholder(str)  # A file for train-labels-idx1-ubyte.
    c.idx_test_images = placeholder(str)  # For t10k-images-idx3-ubyte (no test files: no test).
    c.idx_test_labels = placeholder(str)  # For t10k-labels-idx1-ubyte.
    c.idx_label_names = placeholder(str)  # Class names, comma-separated; unset = "0", "1", ...
    c.idx_eval = 5000  # Training images held out for validation, stratified by class.
    c.idx_seed = 0  # Seed of the held-out draw.

    # --- Batches.
    c.batch_size = 64  # Global training images per step.
    c.batch_multiple = 8  # Global rows per batch divisible by this (data-parallel devices).
    c.eval_batch_size = 128  # Global rows per evaluation batch.
    c.shuffle_seed = 0  # Seed of the per-epoch shuffle and of the augmentation.
    c.num_workers = 0  # Grain worker processes; 0 = threads in this process.

    # --- Augmentation (training batches only).
    c.random_rotate = 0.0  # Max degrees an image turns either way (bilinear); 0 = off.
    c.random_scale = 0.0  # Max relative change of size, e.g. 0.1 = 90% to 110%; 0 = off.
    c.random_shift = 1  # Max pixels an image moves in x and in y (border filled with 0); 0 = off.
    c.random_shift_from_epoch = 0  # Epochs before this one (0-based) are not shifted; 0 = all.
    c.random_flip = False  # Mirror left-right with probability 1/2 (digits are not symmetric).
    return c


def _check_bool(cfg: ml_collections.ConfigDict, field: str) -> None:
    if not isinstance(cfg[field], bool):
        raise fail(field, f"got {cfg[field]!r}", "Use True or False.")


def _check_text(cfg: ml_collections.ConfigDict, field: str, hint: str) -> None:
    if not isinstance(cfg[field], str) or not cfg[field]:
        raise fail(field, f"got {cfg[field]!r}", f"Use a non-empty string ({hint}).")


def _check_folder(cfg: ml_collections.ConfigDict, field: str) -> None:
    if not storage.as_path(cfg[field]).is_dir():
        raise fail(
            field,
            f"{cfg[field]!r} is not a folder (looked for {storage.as_path(cfg[field])})",
            "Give a folder of class subfolders; relative paths are read from the current "
            "directory.",
        )


def idx_folder(cfg: ml_collections.ConfigDict) -> str | None:
    """The IDX folder to read: data.idx_dir, else Debian's Fashion-MNIST folder when it is
    installed and no training file is given by itself, else None."""
    if cfg.idx_dir is not None:
        return cfg.idx_dir
    if cfg.idx_train_images is None and storage.as_path(idx.DEBIAN_FASHION_MNIST).is_dir():
        return idx.DEBIAN_FASHION_MNIST
    return None


def idx_label_names(cfg: ml_collections.ConfigDict) -> tuple[str, ...] | None:
    """data.idx_label_names split at commas (spaces around a name dropped), or None."""
    if cfg.idx_label_names is None:
        return None
    return tuple(name.strip() for name in cfg.idx_label_names.split(","))


def _check_idx(cfg: ml_collections.ConfigDict) -> None:
    for field in IDX_FILE_FIELDS:
        check_optional_file(cfg, field)
    folder = idx_folder(cfg)
    if folder is None and (cfg.idx_train_images is None or cfg.idx_train_labels is None):
        raise fail(
            "idx_dir",
            f"not set, no training files given, and {idx.DEBIAN_FASHION_MNIST} is absent",
            "Set data.idx_dir to a folder of MNIST-style IDX files (train-images-idx3-ubyte[.gz] "
            "and the others), or data.idx_train_images and data.idx_train_labels; for "
            "Fashion-MNIST on Debian or Ubuntu: apt-get install dataset-fashion-mnist.",
        )
    if cfg.idx_dir is not None and not storage.as_path(cfg.idx_dir).is_dir():
        raise fail(
            "idx_dir",
            f"{cfg.idx_dir!r} is not a folder (looked for {storage.as_path(cfg.idx_dir)})",
            "Give the folder holding the IDX files.",
        )
    names = idx_label_names(cfg)
    if names is not None and (len(names) < 2 or not all(names) or len(set(names)) < len(names)):
        raise fail(
            "idx_label_names",
            f"got {cfg.idx_label_names!r}",
            'Give two or more distinct, non-empty names separated by commas, e.g. "cat,dog".',
        )
    check_int(cfg, "idx_eval", 1)
    check_int(cfg, "idx_seed", 0)


def validate_image_data_config(cfg: ml_collections.ConfigDict) -> None:
    """Checks every field the image input reads; raises naming the first bad one."""
    check_missing(cfg, default_image_data_config(), "default_image_data_config")
    check_choice(cfg, "source", SOURCES)
    if cfg.source == "digits":
        check_int(cfg, "digits_seed", 0)
        check_int(cfg, "digits_eval", 1)
        check_int(cfg, "digits_test", 0)
        if cfg.digits_eval + cfg.digits_test > DIGITS_TOTAL // 2:
            raise fail(
                "digits_test",
                f"digits_eval + digits_test = {cfg.digits_eval + cfg.digits_test} of the "
                f"{DIGITS_TOTAL} digits are held out",
                f"Hold out at most {DIGITS_TOTAL // 2} so that most images train.",
            )
    if cfg.source == "tfds":
        _check_text(cfg, "tfds_name", 'e.g. "mnist"')
        _check_bool(cfg, "tfds_download")
        for field in ("tfds_train_split", "tfds_eval_split", "tfds_image_key", "tfds_label_key"):
            _check_text(cfg, field, "see default_image_data_config")
        if not isinstance(cfg.tfds_test_split, str):
            raise fail("tfds_test_split", f"got {cfg.tfds_test_split!r}", "Use a split or ''.")
    if cfg.source == "folder":
        for field in ("folder_train", "folder_eval"):
            if cfg[field] is None:
                raise fail(field, "not set", "Give a folder of ROOT/<class>/<image> files.")
        for field in ("folder_train", "folder_eval", "folder_test"):
            if cfg[field] is not None:
                _check_folder(cfg, field)
        if cfg.folder_size is not None:
            check_int(cfg, "folder_size", 1)
        if cfg.folder_channels not in (1, 3) or isinstance(cfg.folder_channels, bool):
            raise fail(
                "folder_channels", f"got {cfg.folder_channels!r}", "Use 1 (grayscale) or 3 (RGB)."
            )
    if cfg.source == "idx":
        _check_idx(cfg)
    check_batching(cfg)
    check_int(cfg, "random_shift", 0)
    check_int(cfg, "random_shift_from_epoch", 0)
    for field, top in (("random_rotate", 180), ("random_scale", 0.5)):
        value = cfg[field]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= top:
            raise fail(field, f"got {value!r}", f"Use a number from 0 (off) to {top}.")
    _check_bool(cfg, "random_flip")


def with_absolute_paths(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """A copy whose path fields are absolute (config.json then works from anywhere)."""
    return absolute_paths(cfg, PATH_FIELDS)
