"""TFDS translation datasets read without TensorFlow: `tfds.data_source` over ArrayRecord files.

Any dataset whose feature is a `tfds.features.Translation` works (wmt14_translate/de-en,
wmt17_translate/..., ted_hrlr_translate/pt_to_en, ...). The direction is chosen by language codes,
so en -> de is read from wmt14_translate/de-en although its supervised keys are (de, en).
Prepared datasets must be in the ArrayRecord format (`file_format="array_record"`); TFRecord
files can only be read through TensorFlow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from transformer_jax.data.tfds_io import READ_CHUNK, open_tfds_split, read_records

__all__ = ["check_languages", "open_tfds_split", "read_tfds_pairs", "tfds_fingerprint"]


def check_languages(source: Any, name: str, source_lang: str, target_lang: str) -> None:
    """Checks that the dataset is a Translation dataset with both language codes.

    Raises:
      ValueError: naming the dataset, its languages and the config field to change.
    """
    features = source.dataset_info.features
    languages = tuple(getattr(features, "languages", ()) or ())
    if not languages:
        raise ValueError(
            f"TFDS dataset {name!r} has features {type(features).__name__}, not a "
            f"tfds.features.Translation. Choose a translation dataset in tfds_name."
        )
    for field, lang in (("source_lang", source_lang), ("target_lang", target_lang)):
        if lang not in languages:
            raise ValueError(
                f"data config field '{field}': {lang!r} is not a language of TFDS "
                f"dataset {name!r}, which has {languages}. Use one of those codes."
            )


def _as_text(value: str | bytes, name: str, split: str, index: int, lang: str) -> str:
    """Returns `value` as str: real ArrayRecord sources give bytes, tfds.testing.mock_data str."""
    if isinstance(value, str):
        return value
    try:
        return bytes(value).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"TFDS dataset {name!r}, split {split!r}, record {index}, language "
            f"{lang!r}: invalid UTF-8 ({e})."
        ) from None


def read_tfds_pairs(
    source: Any,
    name: str,
    split: str,
    source_lang: str,
    target_lang: str,
    indices: Sequence[int] | np.ndarray,
) -> list[tuple[str, str]]:
    """Reads the records at `indices` of a data source as (source, target) text pairs.

    Args:
      source: from `open_tfds_split`.
      name, split: for error messages.
      source_lang, target_lang: the Translation keys to read, in that direction.
      indices: record indices, e.g. `range(start, stop)` for one host's shard.

    Returns:
      One pair per index, in the order of `indices`.
    """
    check_languages(source, name, source_lang, target_lang)
    pairs = []
    for chunk_start in range(0, len(indices), READ_CHUNK):
        chunk = [int(i) for i in indices[chunk_start : chunk_start + READ_CHUNK]]
        for index, record in zip(chunk, read_records(source, chunk), strict=True):
            pairs.append(
                (
                    _as_text(record[source_lang], name, split, index, source_lang),
                    _as_text(record[target_lang], name, split, index, target_lang),
                )
            )
    return pairs


def tfds_fingerprint(source: Any, split: str, data_dir: str | None) -> str:
    """Identifies a TFDS split (name, config, version, data_dir) for cache keys."""
    return f"tfds-{source.dataset_info.full_name}-{split}-{data_dir}"
