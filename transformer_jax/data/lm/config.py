"""The language-model input's configuration: one ConfigDict, one comment per field, validation.

The defaults train on the embedded corpus of the Python standard library's documentation, which
ships with every Python: no data and no network. For your own text set `source="text"` and the
`text_*` paths; for a TFDS text dataset (lm1b, tiny_shakespeare, ...) `source="tfds"`.
"""

from __future__ import annotations

import ml_collections
from ml_collections.config_dict import placeholder

from transformer_jax import storage
from transformer_jax.data.config_checks import (
    absolute_paths,
    check_choice,
    check_coverage,
    check_int,
    check_optional_file,
    fail,
)

SOURCES = ("stdlib", "text", "tfds")
TOKENIZERS = ("sentencepiece", "byte", "pretrained")
TEXT_DOCUMENTS = ("blank_lines", "file")
SPM_MODEL_TYPES = ("unigram", "bpe")
SPLITS = ("train", "eval", "test")
PATH_FIELDS = ("text_train", "text_eval", "text_test", "spm_model_path")
# Fields that decide the vocabulary or the text: a workdir trained with others is refused.
MODEL_DEFINING_FIELDS = (
    "source",
    "tokenizer",
    "vocab_size",
    "spm_model_type",
    "spm_model_path",
    "tfds_name",
    "tfds_text_key",
    "text_train",
    "text_documents",
)


def default_lm_data_config() -> ml_collections.ConfigDict:
    """Returns the default language-model data configuration (the stdlib documentation)."""
    c = ml_collections.ConfigDict()
    # Where documents come from: "stdlib" (embedded), "text" (own files) or "tfds".
    c.source = "stdlib"

    # --- Own text (source="text"): a file, or a folder whose *.txt files are read in name order.
    c.text_train = placeholder(str)  # Training text, UTF-8.
    c.text_eval = placeholder(str)  # Validation text (needed: it picks the best checkpoint).
    c.text_test = placeholder(str)  # Test text; unset = no final test.
    c.text_documents = "blank_lines"  # Documents are "blank_lines"-separated blocks, or "file"s.

    # --- TFDS (source="tfds"): any dataset with a text feature, read without TensorFlow.
    c.tfds_name = "tiny_shakespeare"  # "name/config" as in tfds.data_source (e.g. "lm1b").
    c.tfds_data_dir = placeholder(str)  # TFDS data directory; unset = ~/tensorflow_datasets.
    c.tfds_download = True  # Let TFDS download and prepare (as ArrayRecord) if not prepared yet.
    c.tfds_text_key = "text"  # The feature holding each record's text.
    c.train_split = "train"  # TFDS split for training.
    c.eval_split = "validation"  # TFDS split for validation.
    c.test_split = "test"  # TFDS split for the final test.

    # --- Tokens: SentencePiece trained on the training split, or raw UTF-8 bytes; with
    # config.init_from, the pretrained run's (its kind named here; "pretrained": converted).
    c.tokenizer = "sentencepiece"  # "sentencepiece", "byte" (260 ids) or "pretrained".
    c.vocab_size = 4096  # SentencePiece pieces (upper bound; includes 256 byte-fallback pieces).
    c.spm_model_type = "unigram"  # "unigram" or "bpe".
    c.spm_character_coverage = 0.9995  # Rarer characters are spelled as bytes (never unk).
    c.spm_sample_size = 20_000  # Training documents sampled to train the tokenizer.
    c.spm_model_path = placeholder(str)  # Existing .model; unset = train workdir/tokenizer.model.

    # --- Rows: documents packed into rows of max_len tokens with segment ids and positions.
    c.max_len = 256  # Tokens per row: the context length (at most the model's max_len).
    c.tokens_per_batch = 8192  # Global tokens per step (rows = tokens_per_batch / max_len).
    c.batch_multiple = 8  # Global rows per batch divisible by this (data-parallel devices).
    c.shuffle_seed = 0  # Seed of the per-epoch shuffle (same seed, same batches).
    c.eval_batch_size = 32  # Global rows per evaluation batch.
    c.num_workers = 0  # Grain worker processes building batches; 0 = threads in this process.
    return c


def validate_lm_data_config(cfg: ml_collections.ConfigDict) -> None:
    """Checks every field the language-model input reads; raises naming the first bad one.

    Raises:
      ValueError: naming the field, the value found and what to set instead.
    """
    missing = sorted(set(default_lm_data_config().keys()) - set(cfg.keys()))
    if missing:
        raise fail(
            missing[0], "missing", "Start from default_lm_data_config() and override fields."
        )
    check_choice(cfg, "source", SOURCES)
    check_choice(cfg, "tokenizer", TOKENIZERS)
    check_choice(cfg, "text_documents", TEXT_DOCUMENTS)
    check_choice(cfg, "spm_model_type", SPM_MODEL_TYPES)
    if cfg.source == "text":
        for field in ("text_train", "text_eval"):
            if cfg[field] is None:
                raise fail(field, "not set", "Give a UTF-8 file or a folder of *.txt files.")
        for field in ("text_train", "text_eval", "text_test"):
            path = cfg[field]
            if path is not None and not storage.as_path(path).exists():
                raise fail(
                    field,
                    f"{path!r} does not exist (looked for {storage.as_path(path)})",
                    "Check the path; relative paths are read from the current directory.",
                )
    if cfg.source == "tfds":
        for field in ("tfds_name", "tfds_text_key", "train_split", "eval_split", "test_split"):
            if not isinstance(cfg[field], str) or not cfg[field]:
                raise fail(field, f"got {cfg[field]!r}", "Use a non-empty string.")
    check_int(cfg, "vocab_size", 300)  # 256 byte pieces + specials + some merges.
    check_coverage(cfg)
    check_optional_file(cfg, "spm_model_path")
    check_int(cfg, "spm_sample_size", 1)
    check_int(cfg, "max_len", 2)
    check_int(cfg, "batch_multiple", 1)
    check_int(cfg, "tokens_per_batch", cfg.max_len * cfg.batch_multiple)
    check_int(cfg, "shuffle_seed", 0)
    check_int(cfg, "eval_batch_size", 1)
    check_int(cfg, "num_workers", 0)
    if cfg.eval_batch_size % cfg.batch_multiple:
        raise fail(
            "eval_batch_size",
            f"{cfg.eval_batch_size} is not divisible by batch_multiple={cfg.batch_multiple}",
            "Use a multiple of batch_multiple.",
        )


def with_absolute_paths(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
    """A copy whose path fields are absolute (config.json then works from anywhere)."""
    return absolute_paths(cfg, PATH_FIELDS)


def rows_per_batch(cfg: ml_collections.ConfigDict) -> int:
    """Global rows per training batch: tokens_per_batch / max_len, down to batch_multiple."""
    rows = cfg.tokens_per_batch // cfg.max_len
    return max(cfg.batch_multiple, rows // cfg.batch_multiple * cfg.batch_multiple)
