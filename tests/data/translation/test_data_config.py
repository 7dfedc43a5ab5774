"""The data config: defaults validate, each bad field is named, bucket lengths."""

import pytest

from transformer_jax.data.translation import (
    bucket_lengths,
    default_data_config,
    validate_data_config,
)


def test_default_config_is_valid():
    cfg = default_data_config()
    validate_data_config(cfg)
    assert cfg.source == "embedded" and cfg.embedded_train_size == 200_000


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("source", "csv"),
        ("embedded_target_lang", "es"),
        ("embedded_train_size", 0),
        ("vocab_size", 3),
        ("tokenizer", "byte"),  # The language model's kind; translation has no byte tokens.
        ("spm_model_type", "wordpiece"),
        ("spm_character_coverage", 1.5),
        ("max_len", 1),
        ("num_buckets", 0),
        ("pack", None),
        ("eval_batch_size", 12),  # Not divisible by batch_multiple=8.
        ("tokens_per_batch", 100),  # Less than 8 rows of max_len=64.
        ("bucket_boundaries", (32, 16)),
        ("bucket_boundaries", (16, 128)),
        ("num_workers", -1),
    ],
)
def test_bad_field_is_named(field, value):
    cfg = default_data_config()
    cfg[field] = value
    with pytest.raises(ValueError, match=f"field '{field}'"):
        validate_data_config(cfg)


def test_tfds_languages_must_differ():
    cfg = default_data_config()
    cfg.source, cfg.source_lang, cfg.target_lang = "tfds", "en", "en"
    with pytest.raises(ValueError, match="field 'target_lang'"):
        validate_data_config(cfg)


def test_text_source_needs_files_or_tsv():
    cfg = default_data_config()
    cfg.source = "text"
    with pytest.raises(ValueError, match="field 'text_train_src'.*text_train_tsv"):
        validate_data_config(cfg)
    cfg.text_train_src, cfg.text_train_tgt, cfg.text_train_tsv = "a", "b", "c"
    with pytest.raises(ValueError, match="field 'text_train_tsv': set together"):
        validate_data_config(cfg)


def test_bucket_lengths():
    cfg = default_data_config()
    cfg.max_len, cfg.num_buckets = 64, 4
    assert bucket_lengths(cfg) == (16, 32, 48, 64)
    cfg.max_len, cfg.num_buckets = 100, 3
    assert bucket_lengths(cfg) == (40, 72, 100)  # Multiples of 8, then max_len.
    cfg.bucket_boundaries = (10, 20)
    assert bucket_lengths(cfg) == (10, 20, 100)  # max_len appended.
    cfg.bucket_boundaries = (10, 100)
    assert bucket_lengths(cfg) == (10, 100)
