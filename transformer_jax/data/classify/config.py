"""Fine-tuning input's configuration: which labelled texts, how long, how many per step.

Sources: "numbers_pair" (is B the translation of A? embedded, offline), "stdlib_packages"
(which standard-library package a documentation sentence comes from, offline), or "tsv" (own
files, one example per line: `label<TAB>text` or `label<TAB>text_a<TAB>text_b`).
"""

from __future__ import annotations

import ml_collections
from ml_collections.config_dict import placeholder

from transformer_jax import storage
from transformer_jax.data.config_checks import (
    absolute_paths,
    check_batching,
    check_choice,
    check_int,
    check_missing,
    check_optional_file,
    fail,
)

SOURCES = ("numbers_pair", "stdlib_packages", "tsv")
PATH_FIELDS = ("tsv_train", "tsv_eval", "tsv_test", "spm_model_path")


def default_classify_data_config() -> ml_collections.ConfigDict:
    """Returns the default fine-tuning data configuration (the number-pair task)."""
    c = ml_collections.ConfigDict()
    c.source = "numbers_pair"  # "numbers_pair", "stdlib_packages" or "tsv".

    # --- numbers_pair: English number vs French (or German) words, 50% translations.
    c.numbers_train = 20_000  # Training examples (even).
    c.numbers_eval = 2_000  # Validation examples (even).
    c.numbers_test = 2_000  # Test examples (even).
    c.numbers_seed = 0  # Which integers (the translation corpus's split by integer).
    c.numbers_lang = "fr"  # Language of B: "fr" or "de".

    # --- stdlib_packages: sentences of asyncio, email, http, unittest, xml docs, balanced.
    c.stdlib_seed = 0  # Seed of the per-class downsampling.

    # --- tsv: own files, UTF-8, `label<TAB>text` or `label<TAB>text_a<TAB>text_b` per line.
    c.tsv_train = placeholder(str)  # Training examples; its labels (sorted) are the classes.
    c.tsv_eval = placeholder(str)  # Validation examples (picks the best checkpoint).
    c.tsv_test = placeholder(str)  # Test examples; unset = no final test.

    # --- Low-label runs: train on a part of the training split (each label in proportion).
    c.train_fraction = 1.0  # Share of the training examples kept, in (0, 1].
    c.train_fraction_seed = 0  # Which ones (the validation and test splits are unchanged).

    # --- Tokens: the pretrained workdir's tokenizer with config.init_from; else this model, or
    # a SentencePiece model (with [CLS] [SEP] [MASK]) trained on the training texts.
    c.spm_model_path = placeholder(str)  # Existing .model; unset = see above.
    c.vocab_size = 4096  # Pieces of a tokenizer trained here (upper bound).

    # --- Rows: one example per row, [CLS] A [SEP] (B [SEP]), cut from the longer text's end.
    c.max_len = 128  # Tokens per row (at most the model's max_len).
    c.batch_size = 32  # Global examples per step.
    c.batch_multiple = 8  # Global rows per batch divisible by this (data-parallel devices).
    c.shuffle_seed = 0  # Seed of the per-epoch shuffle.
    c.eval_batch_size = 64  # Global rows per evaluation batch.
    c.num_workers = 0  # Grain worker processes; 0 = threads in this process.
    return c


def validate_classify_data_config(cfg: ml_collections.ConfigDict) -> None:
    """Checks every field the fine-tuning input reads; raises naming the first bad one."""
    check_missing(cfg, default_classify_data_config(), "default_classify_data_config")
    check_choice(cfg, "source", SOURCES)
    if cfg.source == "numbers_pair":
        for field in ("numbers_train", "numbers_eval", "numbers_test"):
            check_int(cfg, field, 2)
            if cfg[field] % 2:
                raise fail(field, f"got {cfg[field]}", "Use an even number (half are positive).")
        check_int(cfg, "numbers_seed", 0)
        check_choice(cfg, "numbers_lang", ("fr", "de"))
    if cfg.source == "stdlib_packages":
        check_int(cfg, "stdlib_seed", 0)
    if cfg.source == "tsv":
        for field in ("tsv_train", "tsv_eval"):
            if cfg[field] is None:
                raise fail(field, "not set", "Give a UTF-8 file of label<TAB>text lines.")
        for field in ("tsv_train", "tsv_eval", "tsv_test"):
            if cfg[field] is not None and not storage.as_path(cfg[field]).is_file():
                raise fail(
                    field,
                    f"{cfg[field]!r} is not a file (looked for {storage.as_path(cfg[field])})",
                    "Check the path; relative paths are read from the current directory.",
                )
    fraction = cfg.train_fraction
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
        raise fail("train_fraction", f"got {fraction!r}", "Use a number in (0, 1], e.g. 0.1.")
    if not 0 < fraction <= 1:
        raise fail("train_fraction", f"got {fraction!r}", "Use a number in (0, 1], e.g. 0.1.")
    check_int(cfg, "train_fraction_seed", 0)
    check_int(cfg, "vocab_size", 300)
    check_optional_file(cfg, "spm_model_path")
    check_int(cfg, "max_len", 4)
    check_batching(cfg)


def with_absolute_paths(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """A copy whose path fields are absolute (config.json then works from anywhere)."""
    return absolute_paths(cfg, PATH_FIELDS)
