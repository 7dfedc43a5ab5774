"""Labelled images from IDX files, the format of MNIST and Fashion-MNIST (local or gs://).

An IDX file is a 4-byte magic number (two zero bytes, a type code, the number of dimensions),
one big-endian uint32 per dimension, then the values, big-endian, in C order. Images are uint8
[N, H, W] (or [N, H, W, C]) and labels uint8 [N]. Files may be gzip-compressed (recognised by
their first bytes, whatever their name).

A folder holds the four files under their original names, `train-images-idx3-ubyte`,
`train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte` and `t10k-labels-idx1-ubyte`, each with or
without `.gz`; single files may be given instead. The validation split is held out of the
training files, stratified by class and seeded (`digits_split_indices`); the t10k files are the
test split.
"""

from __future__ import annotations

import gzip
import os
import zlib

import numpy as np

from transformer_jax import storage
from transformer_jax.data.images.digits import digits_split_indices
from transformer_jax.data.images.examples import ImageSplit, ImageSplits

# Type code -> big-endian NumPy dtype (the IDX specification's table).
IDX_TYPES = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
# Role -> the file's original name (without .gz) in an MNIST-style folder.
FILE_NAMES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# Debian's `dataset-fashion-mnist` package installs the original files here.
DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_LABELS = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
_GZIP_MAGIC = b"\x1f\x8b"


def _file_bytes(path: str) -> bytes:
    """The file's bytes, decompressed when it is gzip; errors name the file."""
    try:
        data = storage.as_path(path).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such IDX file.") from None
    if data[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise ValueError(
                f"{path}: a damaged or truncated gzip file ({e}). Download it again."
            ) from None
    return data


def parse_idx(data: bytes, where: str) -> np.ndarray:
    """The array an IDX file's bytes hold, in native byte order.

    Args:
      data: the file's (decompressed) bytes.
      where: the file's name, for errors.

    Returns:
      An array of the file's shape and type (uint8 for the usual images and labels).

    Raises:
      ValueError: a wrong magic number, an unknown type code, or data that is shorter or
        longer than the header's dimensions say.
    """
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in IDX_TYPES:
        raise ValueError(
            f"{where}: not an IDX file (magic number {data[:4].hex() or 'missing'}; expected "
            f"00 00, a type code of {sorted(hex(t) for t in IDX_TYPES)}, then the number of "
            f"dimensions). Give the original MNIST-style files (gzip or not)."
        )
    dtype, ndim = IDX_TYPES[data[2]], data[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(data) < header:
        raise ValueError(f"{where}: the IDX header declares {ndim} dimensions but is cut short.")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    expected = header + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(
            f"{where}: the header declares {dtype.name} {shape} ({expected:,} bytes with the "
            f"header) but the file holds {len(data):,} bytes: it is "
            f"{'truncated' if len(data) < expected else 'longer than its header says'}. "
            f"Download it again."
        )
    values = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def idx_shape(path: str) -> tuple[int, ...]:
    """The shape an IDX file's header declares, reading only the header (gzip or not)."""
    with storage.as_path(path).open("rb") as f:
        head = f.read(2)
        f.seek(0)
        stream = gzip.GzipFile(fileobj=f) if head == _GZIP_MAGIC else f
        try:
            magic = stream.read(4)
            ndim = magic[3] if len(magic) == 4 else 0
            data = magic + stream.read(4 * ndim)
        except (EOFError, OSError, zlib.error) as e:
            raise ValueError(f"{path}: a damaged gzip file ({e}). Download it again.") from None
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] not in IDX_TYPES or len(data) < 4 + 4 * ndim:
        raise ValueError(f"{path}: not an IDX file (header {data[:4].hex() or 'missing'}).")
    return tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))


def read_idx(path: str) -> np.ndarray:
    """The array in the IDX file `path` (gzip or not); see `parse_idx`."""
    return parse_idx(_file_bytes(path), os.fspath(path))


def read_images_and_labels(images_path: str, labels_path: str) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 images [N, H, W, C], int32 labels [N]) from a pair of IDX files.

    Raises:
      ValueError: images that are not uint8 [N, H, W(, C)], labels that are not one integer per
        image, or counts that differ; each error names the file.
    """
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.dtype != np.uint8 or images.ndim not in (3, 4):
        raise ValueError(
            f"{images_path}: holds {images.dtype} {images.shape}; expected uint8 images "
            f"[N, H, W] or [N, H, W, C]. Is it a labels file given as images?"
        )
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(
            f"{labels_path}: holds {labels.dtype} {labels.shape}; expected one integer label "
            f"per image [N]. Is it an images file given as labels?"
        )
    if len(images) != len(labels):
        raise ValueError(
            f"{images_path} holds {len(images):,} images but {labels_path} holds "
            f"{len(labels):,} labels; expected one label per image. Give files of the same set."
        )
    if images.ndim == 3:
        images = images[..., None]
    return images, labels.astype(np.int32)


def idx_paths(folder: str | None, files: dict[str, str | None]) -> dict[str, str | None]:
    """Each role of FILE_NAMES -> its file: the one given in `files`, else the folder's.

    Args:
      folder: an MNIST-style folder, or None (then every training file must be given).
      files: role -> a file given by itself, or None.

    Returns:
      role -> path; the test roles are None when neither a file nor the folder's gives them.

    Raises:
      FileNotFoundError: a training file that neither `files` nor the folder has.
    """
    paths = {}
    for role, name in FILE_NAMES.items():
        path = files.get(role)
        if path is None and folder is not None:
            for candidate in (f"{name}.gz", name):
                if (storage.as_path(folder) / candidate).exists():
                    path = os.fspath(storage.as_path(folder) / candidate)
                    break
        if path is None and role.startswith("train"):
            raise FileNotFoundError(
                f"IDX {role.replace('_', ' ')}: "
                + (f"{folder} has no {name} or {name}.gz" if folder else "no folder given")
                + f". Set data.idx_dir to a folder holding {name}[.gz] (or data.idx_{role} to "
                f"the file)."
            )
        paths[role] = path
    return paths


def idx_dataset(
    paths: dict[str, str | None],
    label_names: tuple[str, ...] | None,
    eval_size: int,
    seed: int,
) -> ImageSplits:
    """The splits of an IDX dataset: train minus a held-out eval set, and the test files.

    Args:
      paths: role of FILE_NAMES -> file (`idx_paths`); no test files = an empty test split.
      label_names: the classes' names, or None for "0", "1", ... up to the largest label.
      eval_size: training images held out for validation, stratified by class (seeded).
      seed: seed of the held-out draw.

    Returns:
      ImageSplits of float32 images in [0, 1] (uint8 / 255).

    Raises:
      ValueError: labels outside the named classes, images of different shapes in train and
        test, or a held-out set that leaves a class no training images.
    """
    train_images, train_labels = read_images_and_labels(
        paths["train_images"], paths["train_labels"]
    )
    if (paths["test_images"] is None) != (paths["test_labels"] is None):
        given = "test_images" if paths["test_images"] else "test_labels"
        raise ValueError(
            f"IDX: {given} is given ({paths[given]}) but not its pair. Give both test files or "
            f"neither."
        )
    test = None
    if paths["test_images"] is not None:
        test = read_images_and_labels(paths["test_images"], paths["test_labels"])
        if test[0].shape[1:] != train_images.shape[1:]:
            raise ValueError(
                f"{paths['test_images']}: images of shape {test[0].shape[1:]}, but "
                f"{paths['train_images']} holds {train_images.shape[1:]}. Give files of one "
                f"dataset."
            )
    top = max(int(train_labels.max()), int(test[1].max()) if test and len(test[1]) else 0)
    names = label_names or tuple(str(k) for k in range(top + 1))
    for role, labels in (("train_labels", train_labels), ("test_labels", test and test[1])):
        if labels is None or not len(labels):
            continue
        if not 0 <= labels.min() <= labels.max() < len(names):
            raise ValueError(
                f"{paths[role]}: labels span [{labels.min()}, {labels.max()}], outside the "
                f"{len(names)} classes of data.idx_label_names. Give one name per class."
            )
    if np.bincount(train_labels, minlength=len(names)).min() == 0:
        missing = np.flatnonzero(np.bincount(train_labels, minlength=len(names)) == 0)
        raise ValueError(
            f"{paths['train_labels']}: no training image of class {missing[0]} "
            f"({names[missing[0]]!r}). Every named class needs training images."
        )
    indices = digits_split_indices(train_labels, seed, eval_size, 0)

    def split(images: np.ndarray, labels: np.ndarray) -> ImageSplit:
        return ImageSplit(images.astype(np.float32) / np.float32(255), labels)

    splits = {
        "train": split(train_images[indices["train"]], train_labels[indices["train"]]),
        "eval": split(train_images[indices["eval"]], train_labels[indices["eval"]]),
        "test": split(*test) if test else split(train_images[:0], train_labels[:0]),
    }
    return ImageSplits(tuple(names), splits)
