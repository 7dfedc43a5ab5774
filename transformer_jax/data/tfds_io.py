"""Opening and reading TFDS datasets without TensorFlow: `tfds.data_source` over ArrayRecord.

Shared by every task's TFDS source. Prepared datasets must be in the ArrayRecord format
(`file_format="array_record"`); TFRecord files can only be read through TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

READ_CHUNK = 4096  # Records per random-access read (batched reads are much faster than single).


def open_tfds_split(name: str, split: str, data_dir: str | None, download: bool) -> Any:
    """Opens one split of a TFDS dataset as a random-access data source.

    Args:
      name: "dataset/config", e.g. "wmt14_translate/de-en" or "tiny_shakespeare".
      split: a TFDS split name or slice, e.g. "validation" or "train[:10%]".
      data_dir: TFDS data directory, or None for the TFDS default.
      download: whether TFDS may download and prepare the dataset first.

    Returns:
      A TFDS ArrayRecord data source (len() and random access; records are dicts).
    """
    import tensorflow_datasets as tfds  # Imported here: slow to import, only this source needs it.

    try:
        return tfds.data_source(name, split=split, data_dir=data_dir, download=download)
    except Exception as e:
        raise ValueError(
            f"TFDS dataset {name!r}, split {split!r} (data_dir={data_dir!r}) could not be opened "
            f"as ArrayRecord: {type(e).__name__}: {e}. Check tfds_name and the *_split fields; "
            f"prepare the dataset with file_format='array_record'."
        ) from e


def read_records(source: Any, indices: list[int]) -> Sequence[dict]:
    """The records at `indices`, read in one batched call where the source supports it."""
    try:
        return source.__getitems__(indices)
    except TypeError:  # tfds.testing.mock_data's source only implements __getitem__ properly.
        return [source[i] for i in indices]
