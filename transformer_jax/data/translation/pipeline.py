"""What the training code calls: tokenizer, training iterator, evaluation batches.

    tokenizer = load_tokenizer_or_train(cfg, workdir)
    train_iter = make_train_iterator(cfg, tokenizer, workdir)      # host-local, infinite
    state = train_iter.get_state()                                 # JSON, for Orbax JsonSave
    eval_batches = make_eval_batches(cfg, tokenizer, "eval")       # fixed shapes, all hosts alike

Files in the workdir (paths from `transformer_jax.runs.layout`): tokenizer.model (+ tokenizer.json,
its settings) and cache/ (generated embedded text, tokenized splits as .npy). `workdir` may be
a `Workdir`, a local path or a gs:// URI.
"""

from __future__ import annotations

import logging
import math

import ml_collections
import numpy as np

from transformer_jax.data import pretrained_tokenizer as converted
from transformer_jax.data.hosts import WorkdirLike, as_workdir, resolve_processes
from transformer_jax.data.tokenizer import Tokenizer, load_or_train, train_tokenizer
from transformer_jax.data.translation import batching, planning, sources, tokenized
from transformer_jax.data.translation import config as config_lib
from transformer_jax.data.translation.iterator import TrainIterator
from transformer_jax.runs.tokenizer import kept_copy

_TOKENIZER_SEED = 0  # Which training sentences the tokenizer sees (independent of shuffle_seed).


def _tokenizer_settings(cfg: ml_collections.ConfigDict) -> dict:
    """The config fields that decide what tokenizer gets trained (kept in tokenizer.json)."""
    fields = ["source", "vocab_size", "spm_model_type", "spm_character_coverage", "spm_sample_size"]
    fields += {
        "tfds": ["tfds_name", "source_lang", "target_lang", "train_split"],
        "text": ["text_train_src", "text_train_tgt", "text_train_tsv"],
        "embedded": ["embedded_target_lang", "embedded_train_size", "embedded_seed"],
    }[cfg.source]
    return {k: cfg[k] for k in fields}


def load_tokenizer_or_train(
    cfg: ml_collections.ConfigDict, workdir: WorkdirLike
) -> tokenized.PairTokenizer:
    """Loads the tokenizer, training it on the training split first if there is none yet.

    Order: a converted checkpoint's tokenizer (`workdir/tokenizer/`, see
    `transformer_jax.interop`: its own special ids); `cfg.spm_model_path` if set (copied to
    `workdir/tokenizer.model` at the first start, and refused on resume if it changed); else
    `workdir/tokenizer.model` if it exists (its
    settings, in tokenizer.json, must match the config); else a new model trained on
    `spm_sample_size` sentences of the training split, written to `workdir/tokenizer.model`.

    Args:
      cfg: the data config.
      workdir: the run's directory.

    Returns:
      The tokenizer (special ids pad=0, eos=1, bos=2, unk=3, but for a converted one).
    """
    if workdir is not None and converted.in_workdir(as_workdir(workdir).path):
        return converted.load(as_workdir(workdir).path / converted.WORKDIR_FOLDER)
    if cfg.spm_model_path is not None:
        if workdir is None:
            return Tokenizer.load(cfg.spm_model_path)
        return kept_copy(cfg.spm_model_path, as_workdir(workdir).tokenizer_model)
    workdir = as_workdir(workdir)

    def train() -> Tokenizer:
        pairs = sources.sample_pairs(
            cfg,
            "train",
            math.ceil(cfg.spm_sample_size / 2),
            _TOKENIZER_SEED,
            cache_dir=workdir.cache,
        )
        sentences = [s for pair in pairs for s in pair][: cfg.spm_sample_size]
        tokenizer = train_tokenizer(
            sentences,
            vocab_size=cfg.vocab_size,
            model_type=cfg.spm_model_type,
            character_coverage=cfg.spm_character_coverage,
        )
        logging.info(
            "Trained a %s tokenizer of %d pieces on %d sentences into %s",
            cfg.spm_model_type,
            tokenizer.vocab_size,
            len(sentences),
            workdir.tokenizer_model,
        )
        return tokenizer

    return load_or_train(
        workdir.tokenizer_model, workdir.tokenizer_settings, _tokenizer_settings(cfg), train
    )


def tokenized_split(
    cfg: ml_collections.ConfigDict,
    tokenizer: tokenized.PairTokenizer,
    split: str,
    workdir: WorkdirLike | None,
    process_index: int,
    process_count: int,
) -> tuple[tokenized.TokenizedPairs, int]:
    """Returns this host's shard of a split, tokenized (cached under workdir/cache if given).

    Args:
      cfg: the data config.
      tokenizer: the tokenizer.
      split: "train", "eval" or "test".
      workdir: the run's directory, or None to tokenize without a cache.
      process_index, process_count: which shard.

    Returns:
      (the shard's tokenized pairs, the number of pairs in the whole split).
    """

    def read() -> tuple[list[tuple[str, str]], int]:
        return sources.read_shard(
            cfg,
            split,
            process_index=process_index,
            process_count=process_count,
            cache_dir=None if workdir is None else as_workdir(workdir).cache,
        )

    if workdir is None:
        pairs, total = read()
        return tokenized.tokenize_pairs(tokenizer, pairs), total
    key = f"{sources.split_fingerprint(cfg, split)}|shard{process_index}of{process_count}"
    return tokenized.cached_tokenize(as_workdir(workdir).cache, key, read, tokenizer)


def _agree_across_processes(counts: tuple[int, ...], process_count: int) -> tuple[int, ...]:
    """Returns the per-bucket maximum over all JAX processes (each host pads to it)."""
    if process_count == 1:
        return counts
    import jax
    from jax.experimental import multihost_utils

    if jax.process_count() != process_count:  # Simulated hosts in one process (tests).
        logging.warning(
            "process_count=%d but JAX runs %d process(es): bucket batch counts are "
            "not agreed across hosts; pass batches_per_bucket to make them so.",
            process_count,
            jax.process_count(),
        )
        return counts
    gathered = multihost_utils.process_allgather(np.asarray(counts, np.int64))
    return tuple(int(c) for c in np.max(gathered.reshape(process_count, -1), axis=0))


def train_shapes(
    cfg: ml_collections.ConfigDict, process_count: int = 1
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes training batches take, from the config alone.

    Args:
      cfg: the data config.
      process_count: number of hosts (global rows are a multiple of it and of batch_multiple).

    Returns:
      (lengths, host-local rows): one entry per bucket, ascending lengths ending with max_len;
      packed rows have the single length max_len. A host's batch of bucket i is
      [rows[i], lengths[i]]; the global one has process_count times the rows.
    """
    lengths = (cfg.max_len,) if cfg.pack else config_lib.bucket_lengths(cfg)
    rows = planning.rows_per_bucket(
        cfg.tokens_per_batch, lengths, cfg.batch_multiple, process_count
    )
    return lengths, rows


def make_train_iterator(
    cfg: ml_collections.ConfigDict,
    tokenizer: tokenized.PairTokenizer,
    workdir: WorkdirLike,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
    batches_per_bucket: tuple[int, ...] | None = None,
) -> TrainIterator:
    """Returns the infinite training iterator over this host's shard.

    Batches are dicts of numpy arrays (see batching.py): bucketed [rows, bucket length], or
    packed [rows, max_len] with segment ids and positions when `cfg.pack`. Rows are host-local:
    the global batch is the concatenation over hosts, with global rows divisible by
    `cfg.batch_multiple` and about `cfg.tokens_per_batch` padded tokens per side.

    Args:
      cfg: the data config.
      tokenizer: from `load_tokenizer_or_train`.
      workdir: the run's directory (caches the tokenized split).
      process_index, process_count: this host's shard; None = jax.process_index()/count().
      batches_per_bucket: agreed batches per bucket and epoch (bucketed mode, simulated hosts);
        None = this host's need, maximised over JAX processes with an all-gather.

    Returns:
      The iterator; `.num_dropped` counts pairs dropped by the length filter on this host.
    """
    process_index, process_count = resolve_processes(process_index, process_count)
    data, _ = tokenized_split(cfg, tokenizer, "train", workdir, process_index, process_count)
    data, dropped = tokenized.filter_by_length(data, cfg.max_len)
    lengths, rows = train_shapes(cfg, process_count)
    if not cfg.pack and batches_per_bucket is None:
        buckets = planning.assign_buckets(data.src_lengths, data.tgt_lengths, lengths)
        local = planning.local_batches_per_bucket(buckets, rows)
        batches_per_bucket = _agree_across_processes(local, process_count)
    logging.info(
        "Training data on host %d/%d: %d pairs (%d dropped as longer than max_len=%d); "
        "batch shapes %s",
        process_index,
        process_count,
        len(data),
        dropped,
        cfg.max_len,
        [(r, n) for r, n in zip(rows, lengths, strict=True)],
    )
    return TrainIterator(
        data,
        lengths=lengths,
        rows=rows,
        pack=cfg.pack,
        seed=cfg.shuffle_seed,
        num_workers=cfg.num_workers,
        batches_per_bucket=batches_per_bucket,
        num_dropped=dropped,
        layout=f"{process_index}/{process_count}",
        ids=batching.SpecialIds.of(tokenizer),
    )


class EvalBatches(list):
    """A list of evaluation batch dicts that also tells how many pairs were dropped.

    Attributes:
      num_pairs: pairs of the split on this host that are in the batches.
      num_dropped: pairs of this host's shard left out as longer than max_len.
    """

    num_pairs: int = 0
    num_dropped: int = 0


def make_eval_batches(
    cfg: ml_collections.ConfigDict,
    tokenizer: tokenized.PairTokenizer,
    split: str,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
    workdir: WorkdirLike | None = None,
) -> EvalBatches:
    """Returns fixed-shape, unpacked batches of a split for loss evaluation, in split order.

    Every host gets the same number of batches of [eval_batch_size / process_count, max_len]:
    rows without a pair are padding with weight 0. Pairs longer than max_len are left out
    (counted in `.num_dropped` and logged).

    Args:
      cfg: the data config.
      tokenizer: the tokenizer.
      split: "train", "eval" or "test".
      process_index, process_count: this host's shard; None = jax.process_index()/count().
      workdir: optional; caches generated text and tokens there.

    Returns:
      An `EvalBatches` list of batch dicts (keys src, tgt_in, tgt_out, weights).
    """
    process_index, process_count = resolve_processes(process_index, process_count)
    if cfg.eval_batch_size % math.lcm(cfg.batch_multiple, process_count):
        raise ValueError(
            f"data config field 'eval_batch_size': {cfg.eval_batch_size} rows do not "
            f"split evenly over {process_count} processes and batch_multiple="
            f"{cfg.batch_multiple}. Use a multiple of both."
        )
    data, total = tokenized_split(cfg, tokenizer, split, workdir, process_index, process_count)
    data, dropped = tokenized.filter_by_length(data, cfg.max_len)
    rows = cfg.eval_batch_size // process_count
    largest_shard = math.ceil(total / process_count)  # Known to every host without talking.
    num_batches = math.ceil(largest_shard / rows)
    slots = np.full(num_batches * rows, -1, np.int64)
    slots[: len(data)] = np.arange(len(data))
    ids = batching.SpecialIds.of(tokenizer)
    batches = EvalBatches(
        batching.padded_batch(data, slots[i * rows : (i + 1) * rows], cfg.max_len, ids=ids)
        for i in range(num_batches)
    )
    batches.num_pairs, batches.num_dropped = len(data), dropped
    return batches
