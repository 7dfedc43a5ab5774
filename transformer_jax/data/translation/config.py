"""The input pipeline's configuration: one ConfigDict, one comment per field, and its validation.

The defaults train on the embedded English -> French number corpus, which needs no data and no
network. For the paper's WMT'14 English -> German set `source="tfds"` and raise `vocab_size`
(37,000 in the paper), `max_len` (e.g. 256) and `tokens_per_batch` (about 25,000 in the paper).
"""

from __future__ import annotations

import math

import ml_collections
from ml_collections.config_dict import placeholder

from transformer_jax import storage
from transformer_jax.data.config_checks import (
    absolute_paths,
    check_coverage,
    check_int,
    check_optional_file,
    fail,
)

SOURCES = ("embedded", "tfds", "text")
EMBEDDED_LANGS = ("fr", "de")
SPM_MODEL_TYPES = ("unigram", "bpe", "char", "word")
TOKENIZERS = ("sentencepiece", "pretrained")
SPLITS = ("train", "eval", "test")
PATH_FIELDS = tuple(f"text_{s}_{k}" for s in SPLITS for k in ("src", "tgt", "tsv")) + (
    "spm_model_path",
)


def default_data_config() -> ml_collections.ConfigDict:
    """Returns the default data configuration (embedded corpus, bucketed batches).

    Returns:
      A ConfigDict; `validate_data_config` checks it.
    """
    c = ml_collections.ConfigDict()
    # Where pairs come from: "embedded" (generated number phrases), "tfds" or "text" (own files).
    c.source = "embedded"

    # --- TFDS (source="tfds"): any Translation dataset, read from ArrayRecord without TensorFlow.
    c.tfds_name = "wmt14_translate/de-en"  # "name/config" as in tfds.data_source.
    c.tfds_data_dir = placeholder(str)  # TFDS data directory; unset = ~/tensorflow_datasets.
    c.tfds_download = True  # Let TFDS download and prepare (as ArrayRecord) if not prepared yet.
    c.source_lang = "en"  # Source language code (a key of the Translation feature).
    c.target_lang = "de"  # Target language code; the direction need not match supervised_keys.
    c.train_split = "train"  # TFDS split for training.
    c.eval_split = "validation"  # TFDS split for evaluation (wmt14: newstest2013).
    c.test_split = "test"  # TFDS split for the final test (wmt14: newstest2014).

    # --- Local text (source="text"): two aligned files (one sentence a line) or one TSV per split.
    c.text_train_src = placeholder(str)  # Training source sentences, UTF-8, one per line.
    c.text_train_tgt = placeholder(str)  # Training target sentences, aligned line by line.
    c.text_train_tsv = placeholder(str)  # Or one file of "source<TAB>target" lines (src/tgt unset).
    c.text_eval_src = placeholder(str)  # Evaluation source file (or use text_eval_tsv).
    c.text_eval_tgt = placeholder(str)  # Evaluation target file.
    c.text_eval_tsv = placeholder(str)  # Evaluation TSV file.
    c.text_test_src = placeholder(str)  # Test source file (or use text_test_tsv).
    c.text_test_tgt = placeholder(str)  # Test target file.
    c.text_test_tsv = placeholder(str)  # Test TSV file.

    # --- Embedded corpus (source="embedded"): English number phrases -> French or German.
    c.embedded_target_lang = "fr"  # "fr" or "de".
    c.embedded_train_size = 200_000  # Training pairs (distinct integers).
    c.embedded_eval_size = 3_000  # Validation pairs (integers disjoint from train and test).
    c.embedded_test_size = 3_000  # Test pairs (integers disjoint from train and validation).
    c.embedded_seed = 0  # Seed that fixes which integers land in which split.

    # --- Tokens: one vocabulary shared by source and target: SentencePiece trained on the
    # training split (or spm_model_path); with config.init_from, the pretrained run's (its kind
    # named here; "pretrained": a converted OPUS-MT model's).
    c.tokenizer = "sentencepiece"  # "sentencepiece" or "pretrained".
    c.vocab_size = 32_000  # Upper bound; a small corpus yields fewer pieces (no hard limit).
    c.spm_model_type = "unigram"  # "unigram" or "bpe" (also "char", "word").
    c.spm_character_coverage = 1.0  # Share of characters covered; the rest map to unk (id 3).
    c.spm_sample_size = 200_000  # Sentences (source and target together) sampled for training.
    c.spm_model_path = placeholder(str)  # Existing .model; unset = train workdir/tokenizer.model.

    # --- Batches of fixed shapes.
    c.max_len = 64  # Max tokens per side including eos (and bos on the decoder input).
    c.tokens_per_batch = 4_096  # Global token budget per step and side (padded rows x length).
    c.num_buckets = 8  # Bucket lengths spread evenly up to max_len (multiples of 8) ...
    c.bucket_boundaries = placeholder(tuple)  # ... or these ascending lengths (max_len appended).
    c.pack = False  # Pack several pairs per row (rows of max_len, with segment ids/positions).
    c.batch_multiple = 8  # Global rows per batch divisible by this (data-parallel devices).
    c.shuffle_seed = 0  # Seed of the per-epoch shuffle (same seed, same batches).
    c.eval_batch_size = 64  # Global rows per evaluation batch (rows of max_len, unpacked).
    c.num_workers = 0  # Grain worker processes building batches; 0 = threads in this process.
    return c


def validate_data_config(cfg: ml_collections.ConfigDict) -> None:
    """Checks every field the pipeline reads; raises ValueError naming the first bad field.

    Args:
      cfg: a config from `default_data_config` (possibly overridden).

    Raises:
      ValueError: naming the field, the value found and what to set instead.
    """
    missing = sorted(set(default_data_config().keys()) - set(cfg.keys()))
    if missing:
        raise fail(missing[0], "missing", "Start from default_data_config() and override fields.")
    if cfg.source not in SOURCES:
        raise fail("source", f"got {cfg.source!r}", f"Use one of {SOURCES}.")
    if cfg.source == "tfds":
        if not isinstance(cfg.tfds_name, str) or not cfg.tfds_name:
            raise fail("tfds_name", f"got {cfg.tfds_name!r}", "Use e.g. 'wmt14_translate/de-en'.")
        for field in ("source_lang", "target_lang", "train_split", "eval_split", "test_split"):
            if not isinstance(cfg[field], str) or not cfg[field]:
                raise fail(field, f"got {cfg[field]!r}", "Use a non-empty string.")
        if cfg.source_lang == cfg.target_lang:
            raise fail(
                "target_lang",
                f"equals source_lang ({cfg.source_lang!r})",
                "Choose two different language codes.",
            )
    if cfg.source == "text":
        check_text_split_fields(cfg, "train")
    if cfg.source == "embedded":
        if cfg.embedded_target_lang not in EMBEDDED_LANGS:
            raise fail(
                "embedded_target_lang",
                f"got {cfg.embedded_target_lang!r}",
                f"Use one of {EMBEDDED_LANGS}.",
            )
        for field in ("embedded_train_size", "embedded_eval_size", "embedded_test_size"):
            check_int(cfg, field, 1)
        check_int(cfg, "embedded_seed", 0)
    if cfg.tokenizer not in TOKENIZERS:
        raise fail(
            "tokenizer",
            f"got {cfg.tokenizer!r}",
            f"Use one of {TOKENIZERS} ('pretrained' comes with config.init_from).",
        )
    check_int(cfg, "vocab_size", 16)
    if cfg.spm_model_type not in SPM_MODEL_TYPES:
        raise fail(
            "spm_model_type", f"got {cfg.spm_model_type!r}", f"Use one of {SPM_MODEL_TYPES}."
        )
    check_coverage(cfg)
    check_optional_file(cfg, "spm_model_path")
    check_int(cfg, "spm_sample_size", 1)
    check_int(cfg, "max_len", 2)
    check_int(cfg, "tokens_per_batch", 1)
    check_int(cfg, "num_buckets", 1)
    if cfg.num_buckets > cfg.max_len:  # Lengths are multiples of 8 up to max_len: no more.
        raise fail(
            "num_buckets",
            f"{cfg.num_buckets} buckets for rows of at most max_len={cfg.max_len} tokens",
            f"Use at most {cfg.max_len} (a few, e.g. 8, keep compilations few).",
        )
    check_int(cfg, "batch_multiple", 1)
    check_int(cfg, "shuffle_seed", 0)
    check_int(cfg, "eval_batch_size", 1)
    check_int(cfg, "num_workers", 0)
    if not isinstance(cfg.pack, bool):
        raise fail("pack", f"got {cfg.pack!r}", "Use True or False.")
    if cfg.eval_batch_size % cfg.batch_multiple:
        raise fail(
            "eval_batch_size",
            f"{cfg.eval_batch_size} is not divisible by batch_multiple={cfg.batch_multiple}",
            "Use a multiple of batch_multiple.",
        )
    bucket_lengths(cfg)  # Raises for bad bucket_boundaries.
    if cfg.tokens_per_batch < cfg.max_len * cfg.batch_multiple:
        raise fail(
            "tokens_per_batch",
            f"{cfg.tokens_per_batch} holds fewer than batch_multiple="
            f"{cfg.batch_multiple} rows of max_len={cfg.max_len}",
            f"Use at least {cfg.max_len * cfg.batch_multiple}.",
        )


def check_text_split_fields(cfg: ml_collections.ConfigDict, split: str) -> None:
    """Checks that a text split names either a TSV file or a source and a target file.

    Args:
      cfg: the data config.
      split: "train", "eval" or "test".

    Raises:
      ValueError: naming the fields that are missing or set together.
    """
    src, tgt, tsv = (f"text_{split}_{kind}" for kind in ("src", "tgt", "tsv"))
    if cfg[tsv] is not None and (cfg[src] is not None or cfg[tgt] is not None):
        raise fail(tsv, f"set together with {src}/{tgt}", "Give either a TSV or two files.")
    if cfg[tsv] is None and (cfg[src] is None or cfg[tgt] is None):
        raise fail(
            src if cfg[src] is None else tgt,
            f"not set for the {split} split",
            f"Set {src} and {tgt} (aligned files) or {tsv}.",
        )
    for field in (src, tgt, tsv):
        if cfg[field] is not None and not storage.as_path(cfg[field]).is_file():
            raise fail(
                field,
                f"{cfg[field]!r} is not a file (looked for {storage.as_path(cfg[field])})",
                "Check the path; relative paths are read from the current directory.",
            )


def with_absolute_paths(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """A copy whose path fields are absolute (config.json then works from anywhere)."""
    return absolute_paths(cfg, PATH_FIELDS)


def bucket_lengths(cfg: ml_collections.ConfigDict) -> tuple[int, ...]:
    """Returns the padded lengths of the buckets, ascending, the last one max_len.

    Without explicit `bucket_boundaries`, `num_buckets` lengths are spread evenly up to max_len
    and rounded up to multiples of 8 (friendly to accelerator tiles).

    Args:
      cfg: the data config.

    Returns:
      Ascending bucket lengths; a pair goes to the first bucket that holds both its sides.
    """
    max_len = cfg.max_len
    if cfg.bucket_boundaries is None:
        lengths = {
            min(max_len, 8 * math.ceil(max_len * i / cfg.num_buckets / 8))
            for i in range(1, cfg.num_buckets + 1)
        }
        return tuple(sorted(lengths))
    bounds = list(cfg.bucket_boundaries)
    if not bounds or any(isinstance(b, bool) or not isinstance(b, int) for b in bounds):
        raise fail(
            "bucket_boundaries",
            f"got {cfg.bucket_boundaries!r}",
            "Use ascending integers, e.g. (16, 32, 64), or None with num_buckets.",
        )
    ascending = all(b1 < b2 for b1, b2 in zip(bounds[:-1], bounds[1:], strict=True))
    if not ascending or bounds[0] < 2 or bounds[-1] > max_len:
        raise fail(
            "bucket_boundaries",
            f"got {tuple(bounds)}",
            f"Use strictly ascending lengths between 2 and max_len={max_len}.",
        )
    if bounds[-1] != max_len:
        bounds.append(max_len)
    return tuple(bounds)
