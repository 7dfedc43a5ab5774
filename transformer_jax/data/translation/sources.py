"""One entry point over the three sources: (source_text, target_text) pairs per split and shard.

Splits are named "train", "eval" and "test" whatever the source calls them (the TFDS split names
come from the config). A shard is a contiguous range of a split: host `i` of `n` reads pairs
[N*i//n, N*(i+1)//n), and only those.
"""

from __future__ import annotations

import os

import ml_collections
import numpy as np

from transformer_jax.data.translation import config as config_lib
from transformer_jax.data.translation import embedded, text_files, tfds_source

Pairs = list[tuple[str, str]]


def shard_range(num_pairs: int, process_index: int, process_count: int) -> tuple[int, int]:
    """Returns [start, stop) of the contiguous shard `process_index` of `process_count`."""
    if not 0 <= process_index < process_count:
        raise ValueError(
            f"process_index={process_index} is not in [0, process_count="
            f"{process_count}). Pass jax.process_index() and jax.process_count()."
        )
    start = num_pairs * process_index // process_count
    return start, num_pairs * (process_index + 1) // process_count


def _check_split(split: str) -> None:
    if split not in config_lib.SPLITS:
        raise ValueError(
            f"unknown split {split!r}: use one of {config_lib.SPLITS} (the TFDS names "
            f"are set by the train_split/eval_split/test_split config fields)."
        )


def _text_pairs(cfg: ml_collections.ConfigDict, split: str) -> Pairs:
    config_lib.check_text_split_fields(cfg, split)
    if cfg[f"text_{split}_tsv"] is not None:
        return text_files.read_tsv(cfg[f"text_{split}_tsv"])
    return text_files.read_aligned(cfg[f"text_{split}_src"], cfg[f"text_{split}_tgt"])


def _embedded_args(cfg: ml_collections.ConfigDict, split: str) -> tuple:
    return (split, cfg[f"embedded_{split}_size"], cfg.embedded_seed, cfg.embedded_target_lang)


def _open_tfds(cfg: ml_collections.ConfigDict, split: str):
    return tfds_source.open_tfds_split(
        cfg.tfds_name, cfg[f"{split}_split"], cfg.tfds_data_dir, cfg.tfds_download
    )


def read_shard(
    cfg: ml_collections.ConfigDict,
    split: str,
    *,
    process_index: int = 0,
    process_count: int = 1,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[Pairs, int]:
    """Reads one host's shard of a split.

    Args:
      cfg: the data config.
      split: "train", "eval" or "test".
      process_index, process_count: which shard.
      cache_dir: where the embedded corpus may cache its generated text (None: no cache).

    Returns:
      (the shard's pairs in order, the number of pairs in the whole split).
    """
    _check_split(split)
    if cfg.source == "tfds":
        source = _open_tfds(cfg, split)
        start, stop = shard_range(len(source), process_index, process_count)
        pairs = tfds_source.read_tfds_pairs(
            source,
            cfg.tfds_name,
            cfg[f"{split}_split"],
            cfg.source_lang,
            cfg.target_lang,
            range(start, stop),
        )
        return pairs, len(source)
    if cfg.source == "text":
        pairs = _text_pairs(cfg, split)
    else:
        pairs = embedded.embedded_pairs(*_embedded_args(cfg, split), cache_dir=cache_dir)
    start, stop = shard_range(len(pairs), process_index, process_count)
    return pairs[start:stop], len(pairs)


def get_pairs(
    cfg: ml_collections.ConfigDict,
    split: str,
    *,
    process_index: int = 0,
    process_count: int = 1,
    cache_dir: str | os.PathLike | None = None,
) -> Pairs:
    """Returns the raw (source_text, target_text) pairs of a split (by default all of them).

    Args:
      cfg: the data config.
      split: "train", "eval" or "test".
      process_index, process_count: read only this shard (default: the whole split).
      cache_dir: where the embedded corpus may cache its generated text (None: no cache).

    Returns:
      The pairs, in source order.
    """
    return read_shard(
        cfg, split, process_index=process_index, process_count=process_count, cache_dir=cache_dir
    )[0]


def sample_pairs(
    cfg: ml_collections.ConfigDict,
    split: str,
    count: int,
    seed: int,
    cache_dir: str | os.PathLike | None = None,
) -> Pairs:
    """Returns up to `count` distinct pairs of a split drawn at random (for tokenizer training).

    TFDS splits are read only at the drawn records; the other sources are read whole.
    """
    rng = np.random.default_rng(seed)
    if cfg.source == "tfds":
        source = _open_tfds(cfg, split)
        n = len(source)
        indices = np.sort(rng.choice(n, size=min(count, n), replace=False))
        return tfds_source.read_tfds_pairs(
            source, cfg.tfds_name, cfg[f"{split}_split"], cfg.source_lang, cfg.target_lang, indices
        )
    pairs, n = read_shard(cfg, split, cache_dir=cache_dir)
    if count >= n:
        return pairs
    return [pairs[i] for i in np.sort(rng.choice(n, size=count, replace=False))]


def split_fingerprint(cfg: ml_collections.ConfigDict, split: str) -> str:
    """Identifies a split's content without reading it (for the token cache's key)."""
    _check_split(split)
    if cfg.source == "tfds":
        name = tfds_source.tfds_fingerprint(
            _open_tfds(cfg, split), cfg[f"{split}_split"], cfg.tfds_data_dir
        )
        return f"{name}-{cfg.source_lang}-{cfg.target_lang}"
    if cfg.source == "text":
        config_lib.check_text_split_fields(cfg, split)
        if cfg[f"text_{split}_tsv"] is not None:
            return "text-" + text_files.file_fingerprint(cfg[f"text_{split}_tsv"])
        return "text-" + text_files.file_fingerprint(
            cfg[f"text_{split}_src"], cfg[f"text_{split}_tgt"]
        )
    return embedded.embedded_fingerprint(*_embedded_args(cfg, split))
