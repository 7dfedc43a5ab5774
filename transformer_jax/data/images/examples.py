"""A split of labelled images, and a dataset's three splits: what every image source gives.

Images are float32 [N, H, W, C] in [0, 1], channels last; labels are int32 [N] indices into the
dataset's `label_names`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

SPLITS = ("train", "eval", "test")


@dataclasses.dataclass(frozen=True)
class ImageSplit:
    """The images of one split and their labels, in a fixed order.

    Attributes:
      images: float32 [N, H, W, C], values in [0, 1].
      labels: int32 [N], class indices.
    """

    images: np.ndarray
    labels: np.ndarray

    def __post_init__(self):
        images, labels = self.images, self.labels
        if not isinstance(images, np.ndarray) or images.dtype != np.float32 or images.ndim != 4:
            raise ValueError(
                f"ImageSplit.images must be a float32 array [N, H, W, C], got "
                f"{type(images).__name__} {getattr(images, 'dtype', '')} "
                f"{getattr(images, 'shape', '')}. Convert with np.asarray(x, np.float32) and "
                f"add the channel axis of grayscale images."
            )
        if not isinstance(labels, np.ndarray) or labels.dtype != np.int32 or labels.ndim != 1:
            raise ValueError(
                f"ImageSplit.labels must be an int32 array [N], got {type(labels).__name__} "
                f"{getattr(labels, 'dtype', '')} {getattr(labels, 'shape', '')}."
            )
        if len(images) != len(labels):
            raise ValueError(f"ImageSplit: {len(images)} images but {len(labels)} labels.")
        if images.size and not (images.min() >= 0.0 and images.max() <= 1.0):  # NaN fails too.
            raise ValueError(
                f"ImageSplit.images must lie in [0, 1], got [{images.min()}, {images.max()}]. "
                f"Divide uint8 pixels by 255."
            )

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of every image."""
        return tuple(self.images.shape[1:])


def empty_split(image_shape: tuple[int, int, int]) -> ImageSplit:
    """A split with no images of shape (H, W, C) (an absent test split)."""
    return ImageSplit(np.zeros((0, *image_shape), np.float32), np.zeros(0, np.int32))


@dataclasses.dataclass(frozen=True)
class ImageSplits:
    """The images of each split and the names of the classes.

    Attributes:
      label_names: class index -> name ("0", "1", ... or the folder names).
      splits: "train" / "eval" / "test" -> ImageSplit, all of the same (H, W, C); an absent
        test split is empty.
    """

    label_names: tuple[str, ...]
    splits: dict[str, ImageSplit]

    def __post_init__(self):
        if sorted(self.splits) != sorted(SPLITS):
            raise ValueError(f"ImageSplits needs the splits {SPLITS}, got {tuple(self.splits)}.")
        shapes = {name: split.image_shape for name, split in self.splits.items()}
        if len(set(shapes.values())) > 1:
            raise ValueError(
                f"The splits' images differ in shape (H, W, C): {shapes}. Every split must "
                f"hold images of one shape (resize them, or set data.folder_size)."
            )
        for name, split in self.splits.items():
            if len(split) and not 0 <= split.labels.min() <= split.labels.max() < self.num_classes:
                raise ValueError(
                    f"{name} split: labels span [{split.labels.min()}, {split.labels.max()}], "
                    f"not within [0, {self.num_classes}) ({self.num_classes} label names)."
                )

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(H, W, C) of every image."""
        return self.splits["train"].image_shape

    @property
    def num_classes(self) -> int:
        """Number of classes (the length of `label_names`)."""
        return len(self.label_names)
