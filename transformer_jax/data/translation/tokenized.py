"""A tokenized corpus as flat arrays, cached as .npy files, and the length filter.

Tokenizing is the expensive part of the input pipeline, so it is done once per (tokenizer, split,
shard): the ids of all pairs are concatenated into one int32 array per side with int64 offsets,
written under `workdir/cache/`, and memory-mapped on later runs. Building a batch is then a few
vectorized numpy gathers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence

import numpy as np

from transformer_jax import storage
from transformer_jax.data.pretrained_tokenizer import MarianTokenizer
from transformer_jax.data.tokenizer import Tokenizer

_FIELDS = ("src_ids", "src_offsets", "tgt_ids", "tgt_offsets")
# What encodes pairs: a SentencePiece model trained here, or a converted OPUS-MT model's
# tokenizer (a run fine-tuned from one with config.init_from).
PairTokenizer = Tokenizer | MarianTokenizer


@dataclasses.dataclass(frozen=True)
class TokenizedPairs:
    """Token ids of N pairs, without eos or bos.

    Pair i's source is `src_ids[src_offsets[i]:src_offsets[i + 1]]`, likewise for the target.

    Attributes:
      src_ids: int32 [total source tokens].
      src_offsets: int64 [N + 1], ascending, starting at 0.
      tgt_ids: int32 [total target tokens].
      tgt_offsets: int64 [N + 1].
    """

    src_ids: np.ndarray
    src_offsets: np.ndarray
    tgt_ids: np.ndarray
    tgt_offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    @property
    def src_lengths(self) -> np.ndarray:
        """int64 [N]: tokens per source (without eos)."""
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        """int64 [N]: tokens per target (without eos)."""
        return np.diff(self.tgt_offsets)

    def pair(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Returns (source ids, target ids) of pair i."""
        return (
            self.src_ids[self.src_offsets[i] : self.src_offsets[i + 1]],
            self.tgt_ids[self.tgt_offsets[i] : self.tgt_offsets[i + 1]],
        )

    def select(self, indices: np.ndarray) -> TokenizedPairs:
        """Returns the pairs at `indices`, in that order, as new compact arrays."""
        src_ids, src_offsets = _gather(self.src_ids, self.src_offsets, indices)
        tgt_ids, tgt_offsets = _gather(self.tgt_ids, self.tgt_offsets, indices)
        return TokenizedPairs(src_ids, src_offsets, tgt_ids, tgt_offsets)


def _gather(
    ids: np.ndarray, offsets: np.ndarray, indices: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    indices = np.asarray(indices, dtype=np.int64)
    lengths = offsets[indices + 1] - offsets[indices]
    new_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    within = np.arange(new_offsets[-1]) - np.repeat(new_offsets[:-1], lengths)
    return ids[np.repeat(offsets[indices], lengths) + within].astype(np.int32), new_offsets


def _flatten(id_lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(id_lists))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(id_lists), dtype=np.int32, count=offsets[-1])
    return flat, offsets


def tokenize_pairs(tokenizer: PairTokenizer, pairs: Sequence[tuple[str, str]]) -> TokenizedPairs:
    """Encodes (source, target) text pairs into flat arrays.

    Args:
      tokenizer: the shared vocabulary's tokenizer. Targets are encoded with its
        `encode_target_batch` where it has one (a converted OPUS-MT tokenizer's target.spm),
        else like sources.
      pairs: N text pairs.

    Returns:
      N tokenized pairs.
    """
    encode_targets = getattr(tokenizer, "encode_target_batch", tokenizer.encode_batch)
    src_ids, src_offsets = _flatten(tokenizer.encode_batch([s for s, _ in pairs]))
    tgt_ids, tgt_offsets = _flatten(encode_targets([t for _, t in pairs]))
    return TokenizedPairs(src_ids, src_offsets, tgt_ids, tgt_offsets)


def cached_tokenize(
    cache_root: str | os.PathLike,
    key: str,
    read_pairs: Callable[[], tuple[Sequence[tuple[str, str]], int]],
    tokenizer: PairTokenizer,
) -> tuple[TokenizedPairs, int]:
    """Tokenizes pairs once and keeps the arrays as .npy files under `cache_root`.

    Args:
      cache_root: directory of the caches (e.g. workdir/cache).
      key: identifies the text and the tokenizer; hashed into the directory name.
      read_pairs: returns (the pairs, the number of pairs in the whole split); called only when
        there is no cache yet.
      tokenizer: the tokenizer.

    Returns:
      (the tokenized pairs, memory-mapped when read from the cache; the split's total pair count).
    """
    digest = hashlib.sha256(f"{key}|{tokenizer.fingerprint}".encode()).hexdigest()[:20]
    directory = storage.as_path(cache_root) / f"tokens-{digest}"
    meta_path = directory / "meta.json"
    if meta_path.exists():
        try:  # Arrays only: np.load refuses pickled objects (allow_pickle=False).
            split_size = json.loads(meta_path.read_bytes())["split_size"]
            arrays = {f: _load(directory / f"{f}.npy") for f in _FIELDS}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(
                f"{directory}: a damaged cache of tokenized text ({type(e).__name__}: {e}). "
                f"Delete the folder: the next run tokenizes the text again."
            ) from e
        return TokenizedPairs(**arrays), split_size
    pairs, split_size = read_pairs()
    data = tokenize_pairs(tokenizer, pairs)
    meta = {"key": key, "tokenizer": tokenizer.fingerprint, "num_pairs": len(data)}
    meta["split_size"] = split_size
    if storage.is_remote(directory):
        # Object stores have no atomic directory rename: meta.json, written last, marks the
        # arrays complete (a concurrent host writes the same bytes).
        for field in _FIELDS:
            with (directory / f"{field}.npy").open("wb") as f:
                np.save(f, getattr(data, field))
        meta_path.write_text(json.dumps(meta))
    else:
        tmp = directory.parent / f"{directory.name}.tmp{os.getpid()}"
        tmp.mkdir(parents=True, exist_ok=True)
        for field in _FIELDS:
            np.save(tmp / f"{field}.npy", getattr(data, field))
        (tmp / "meta.json").write_text(json.dumps(meta))
        try:
            os.replace(tmp, directory)  # Atomic; another host may have won the race: fine.
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    logging.info("Tokenized %d pairs into %s", len(data), directory)
    return data, split_size


def _load(path) -> np.ndarray:
    """A cached array: memory-mapped from a local file, read whole from an object store."""
    if storage.is_remote(path):
        with path.open("rb") as f:
            return np.load(f)
    return np.load(path, mmap_mode="r")


def filter_by_length(data: TokenizedPairs, max_len: int) -> tuple[TokenizedPairs, int]:
    """Drops pairs whose source + eos or bos/eos + target would not fit in `max_len` tokens.

    Args:
      data: tokenized pairs (without eos).
      max_len: the maximum number of tokens per side, eos included.

    Returns:
      (the kept pairs in order, the number dropped).
    """
    keep = (data.src_lengths + 1 <= max_len) & (data.tgt_lengths + 1 <= max_len)
    dropped = int(len(data) - keep.sum())
    if dropped:
        logging.info(
            "Dropped %d of %d pairs longer than max_len=%d tokens (eos included)",
            dropped,
            len(data),
            max_len,
        )
        return data.select(np.flatnonzero(keep)), dropped
    return data, 0
