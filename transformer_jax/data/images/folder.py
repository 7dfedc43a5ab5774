"""Labelled images from own files: `ROOT/<class>/<file>`, one root per split (local or gs://).

The classes are the training root's subfolders, sorted by name; an eval or test root may lack
some of them but may not add any. Image files are those ending in one of IMAGE_EXTENSIONS (any
case); hidden files and folders (".name") and other files are ignored. Every image is converted
to grayscale ("L") or RGB and, with `size`, resized to size x size (bilinear); without `size`
all images must already share one size.
"""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from etils import epath
from PIL import Image, UnidentifiedImageError  # The `vision` extra (and matplotlib's need).

from transformer_jax import storage
from transformer_jax.data.images.examples import ImageSplit, ImageSplits, empty_split

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
READ_THREADS = 16  # Files read at once (hides gs:// latency; Pillow decodes outside the GIL).
MAX_LISTED = 10  # Bad files named in one error.


def _visible(path: epath.Path) -> bool:
    return not path.name.startswith(".")


def class_folders(root: str) -> dict[str, epath.Path]:
    """Class name -> folder, for the visible subfolders of `root`, sorted by name."""
    path = storage.as_path(root)
    if not path.is_dir():
        raise ValueError(f"{root}: not a folder. Give a folder of <class>/<image> subfolders.")
    folders = {p.name: p for p in path.iterdir() if _visible(p) and p.is_dir()}
    return dict(sorted(folders.items()))


def image_files(folder: epath.Path) -> list[epath.Path]:
    """The visible image files of one class folder, sorted by name; raises when there are none."""
    files = sorted(
        (p for p in folder.iterdir() if _visible(p) and p.suffix.lower() in IMAGE_EXTENSIONS),
        key=lambda p: p.name,
    )
    if not files:
        raise ValueError(
            f"{folder}: no image files ({', '.join(IMAGE_EXTENSIONS)}). Add images or remove "
            f"the folder."
        )
    return files


def read_image(path: epath.Path, size: int | tuple[int, int] | None, channels: int) -> np.ndarray:
    """One file as uint8 [H, W, C]: converted to "L" (C = 1) or "RGB" (C = 3), maybe resized
    (bilinear) to `size` (square) or `(height, width)`."""
    with Image.open(io.BytesIO(path.read_bytes())) as image:
        image = image.convert("L" if channels == 1 else "RGB")
        if size is not None:
            height, width = (size, size) if isinstance(size, int) else size
            image = image.resize((width, height), Image.Resampling.BILINEAR)
        pixels = np.asarray(image, np.uint8)
    return pixels[..., None] if pixels.ndim == 2 else pixels


def _try_read(args: tuple[epath.Path, int | None, int]) -> np.ndarray | str:
    """The image, or a line describing why the file could not be read."""
    path = args[0]
    try:
        return read_image(*args)
    except UnidentifiedImageError:  # Its message names only the BytesIO object.
        return f"{path} (not an image format Pillow knows)"
    except Exception as e:  # Any other decoder error (OSError, SyntaxError, ...): a bad file.
        return f"{path} ({type(e).__name__}: {e})"


def _check_bad(bad: list[str]) -> None:
    if bad:
        listed = "\n  ".join(bad[:MAX_LISTED])
        more = f"\n  ... and {len(bad) - MAX_LISTED} more" if len(bad) > MAX_LISTED else ""
        raise ValueError(
            f"{len(bad)} image file(s) could not be read:\n  {listed}{more}\n"
            f"Delete or fix them (re-save them as PNG or JPEG)."
        )


def _check_sizes(files: list[epath.Path], images: list[np.ndarray]) -> None:
    for path, image in zip(files, images, strict=True):
        if image.shape != images[0].shape:
            raise ValueError(
                f"{path}: {image.shape[1]}x{image.shape[0]} pixels, but {files[0]} is "
                f"{images[0].shape[1]}x{images[0].shape[0]}. Set data.folder_size to resize "
                f"every image to one square size."
            )


def folder_dataset(
    train_root: str,
    eval_root: str,
    test_root: str | None,
    size: int | None,
    channels: int,
) -> ImageSplits:
    """The images under the three roots, labelled by the training root's subfolders.

    Args:
      train_root: folder of <class>/<image> files; its subfolders (at least 2) are the classes.
      eval_root: the same layout, with classes among the training ones.
      test_root: the same, or None for no test split (an empty one).
      size: resize every image to size x size; None keeps the files' size (all must agree).
      channels: 1 (grayscale) or 3 (RGB).

    Returns:
      ImageSplits with label_names the class folder names and images float32
      [N, H, W, channels] in [0, 1], ordered by class and then file name.

    Raises:
      ValueError: fewer than 2 classes, an unknown eval/test class, an empty class folder,
        unreadable files (all named, up to MAX_LISTED), or differing sizes without `size`.
    """
    names = tuple(class_folders(train_root))
    if len(names) < 2:
        raise ValueError(
            f"{train_root}: {len(names)} class folder(s) {list(names)}; classification needs "
            f"at least 2 (ROOT/<class>/<image>)."
        )
    roots = {"train": train_root, "eval": eval_root, "test": test_root}
    listed = {}  # split -> (file paths, labels)
    for split, root in roots.items():
        if root is None:
            continue
        folders = class_folders(root)
        unknown = sorted(set(folders) - set(names))
        if unknown:
            raise ValueError(
                f"{root}: class folder {unknown[0]!r} is not a class of the training root "
                f"{train_root} ({list(names)}). Rename or remove it, or add it to training."
            )
        if not folders:
            raise ValueError(f"{root}: no class folders. Give a folder of <class>/<image> files.")
        files, labels = [], []
        for label, name in enumerate(names):
            if name in folders:
                found = image_files(folders[name])
                files += found
                labels += [label] * len(found)
        listed[split] = (files, np.asarray(labels, np.int32))
    unique = list({str(path): path for files, _ in listed.values() for path in files}.values())
    with ThreadPoolExecutor(READ_THREADS) as pool:
        read = list(pool.map(_try_read, [(path, size, channels) for path in unique]))
    _check_bad([r for r in read if isinstance(r, str)])
    _check_sizes(unique, read)
    pixels = {str(path): image for path, image in zip(unique, read, strict=True)}
    splits = {}
    for split, (files, labels) in listed.items():
        images = np.stack([pixels[str(p)] for p in files]).astype(np.float32) / np.float32(255)
        splits[split] = ImageSplit(images, labels)
    splits.setdefault("test", empty_split(splits["train"].image_shape))
    return ImageSplits(names, splits)
