"""Documents of a split from the three language-model sources: stdlib docs, own text, TFDS.

Splits are named "train", "eval" and "test" whatever the source calls them. Every source gives
a list of non-empty document texts in a fixed order. Documents never contain `SEPARATOR`
(the byte that ends each document for the compressors of the bits-per-byte baselines); a text
that does is refused, naming where.
"""

from __future__ import annotations

import os
import re
from typing import Any

import ml_collections

from transformer_jax import storage
from transformer_jax.data.files import read_text
from transformer_jax.data.lm import config as config_lib
from transformer_jax.data.lm.rows import SEPARATOR
from transformer_jax.data.lm.stdlib_corpus import load_stdlib_corpus
from transformer_jax.data.tfds_io import READ_CHUNK, open_tfds_split, read_records

_BLANK_LINES = re.compile(r"\n[ \t\r]*\n(?:[ \t\r]*\n)*")


def _check_split(split: str) -> None:
    if split not in config_lib.SPLITS:
        raise ValueError(f"unknown split {split!r}: use one of {config_lib.SPLITS}.")


def _check_text(text: str, where: str) -> None:
    if SEPARATOR in text:
        raise ValueError(
            f"{where}: contains the control character U+001E (record separator), which "
            f"transformer_jax uses to end documents. Remove it from the text."
        )


def split_documents(text: str, mode: str) -> list[str]:
    """The documents of one file's text: the whole file, or blocks between blank lines.

    Line ends become "\\n"; whitespace around each document is stripped; empty ones dropped.
    """
    text = text.replace("\r\n", "\n")
    blocks = [text] if mode == "file" else _BLANK_LINES.split(text)
    return [b.strip() for b in blocks if b.strip()]


def _txt_files(folder: Any) -> list[Any]:
    # A walk by hand: epath refuses `rglob` on Cloud Storage.
    found = []
    for child in folder.iterdir():
        if child.is_dir():
            found += _txt_files(child)
        elif child.name.endswith(".txt"):
            found.append(child)
    return found


def text_files(path: str | os.PathLike) -> list[Any]:
    """A file, or the *.txt files of a folder (and its subfolders) in path order."""
    path = storage.as_path(path)
    if path.is_dir():
        files = sorted(_txt_files(path), key=str)
        if not files:
            raise ValueError(f"{path}: the folder has no *.txt files. Put UTF-8 .txt files there.")
        return files
    return [path]


def read_text_documents(path: str | os.PathLike, mode: str) -> list[str]:
    """Documents of a file or folder (see `split_documents`); UTF-8 errors name file and line."""
    documents = []
    for file in text_files(path):
        text = read_text(file)
        _check_text(text, str(file))
        documents += split_documents(text, mode)
    return documents


def read_tfds_documents(cfg: ml_collections.ConfigDict, split: str) -> list[str]:
    """The `tfds_text_key` feature of every record of a TFDS split (bytes or str)."""
    name, tfds_split = cfg.tfds_name, cfg[f"{split}_split"]
    source = open_tfds_split(name, tfds_split, cfg.tfds_data_dir, cfg.tfds_download)
    documents = []
    for start in range(0, len(source), READ_CHUNK):
        indices = list(range(start, min(start + READ_CHUNK, len(source))))
        for index, record in zip(indices, read_records(source, indices), strict=True):
            if cfg.tfds_text_key not in record:
                raise ValueError(
                    f"TFDS dataset {name!r} has no feature {cfg.tfds_text_key!r} (it has "
                    f"{sorted(record)}). Set data.tfds_text_key to its text feature."
                )
            value = record[cfg.tfds_text_key]
            try:
                text = value if isinstance(value, str) else bytes(value).decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(
                    f"TFDS dataset {name!r}, split {tfds_split!r}, record {index}: invalid "
                    f"UTF-8 ({e})."
                ) from None
            _check_text(text, f"TFDS dataset {name!r}, split {tfds_split!r}, record {index}")
            if text.strip():
                documents.append(text.replace("\r\n", "\n"))
    return documents


def read_documents(
    cfg: ml_collections.ConfigDict, split: str, cache_dir: str | os.PathLike | None = None
) -> list[str]:
    """The documents of `split` ("train", "eval" or "test") from the configured source.

    Args:
      cfg: the language-model data config.
      split: which split.
      cache_dir: where the stdlib corpus is cached (the run's cache folder), or None.

    Returns:
      The documents in a fixed order; empty for an unset optional text split (text_test).

    Raises:
      ValueError: an empty split, a file that is not UTF-8, a missing feature (named).
    """
    _check_split(split)
    if cfg.source == "stdlib":
        documents = load_stdlib_corpus(cache_dir).splits[split]
        where = f"the stdlib corpus's {split} split"
    elif cfg.source == "text":
        path = cfg[f"text_{split}"]
        if path is None:
            if split == "test":
                return []
            raise ValueError(f"data config field 'text_{split}' is not set: give a file.")
        documents = read_text_documents(path, cfg.text_documents)
        where = f"data.text_{split} ({path})"
    else:
        documents = read_tfds_documents(cfg, split)
        where = f"TFDS dataset {cfg.tfds_name!r}, split {cfg[f'{split}_split']!r}"
    if not documents:
        raise ValueError(f"{where} has no documents (only whitespace or nothing at all).")
    return documents


def source_fingerprint(cfg: ml_collections.ConfigDict) -> dict:
    """The config fields that decide which documents a run reads (kept with the tokenizer)."""
    fields = {
        "stdlib": [],
        "text": ["text_train", "text_documents"],
        "tfds": ["tfds_name", "tfds_text_key", "train_split"],
    }[cfg.source]
    return {"source": cfg.source, **{k: cfg[k] for k in fields}}
