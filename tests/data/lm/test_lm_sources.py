"""Language-model documents from own text files and TFDS (mock_data), and every bad input."""

import pydoc_data.topics
import re

import pytest
import tensorflow_datasets as tfds

from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.data.lm import config as lm_config
from transformer_jax.data.lm import pipeline
from transformer_jax.data.lm.sources import read_documents, read_text_documents, split_documents


def _cfg(**overrides):
    cfg = lm_config.default_lm_data_config()
    for k, v in overrides.items():
        cfg[k] = v
    return cfg


def test_blank_lines_separate_documents_and_line_ends_are_normalised():
    text = "First doc\r\nline two\r\n\r\n\n  \nSecond doc\n\n\n\nThird\n"
    assert split_documents(text, "blank_lines") == ["First doc\nline two", "Second doc", "Third"]
    assert split_documents(text, "file") == [text.replace("\r\n", "\n").strip()]


def test_a_folder_is_read_in_name_order_one_document_per_file(tmp_path):
    (tmp_path / "b.txt").write_text("beta\n\nmore beta")
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.txt").write_text("gamma")
    (tmp_path / "notes.md").write_text("not read")
    assert read_text_documents(tmp_path, "file") == ["alpha", "beta\n\nmore beta", "gamma"]
    assert read_text_documents(tmp_path, "blank_lines") == ["alpha", "beta", "more beta", "gamma"]


def test_bad_files_are_named(tmp_path):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("line one\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=re.escape(f"{latin1}:2: invalid UTF-8")):
        read_text_documents(latin1, "blank_lines")
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n\n")
    with pytest.raises(ValueError, match="empty"):
        read_text_documents(empty, "blank_lines")
    separator = tmp_path / "sep.txt"
    separator.write_text("a\x1eb")
    with pytest.raises(ValueError, match="U\\+001E"):
        read_text_documents(separator, "blank_lines")
    with pytest.raises(ValueError, match="no \\*.txt files"):
        read_text_documents(_empty_dir(tmp_path), "file")


def _empty_dir(tmp_path):
    d = tmp_path / "nothing"
    d.mkdir()
    return d


def test_config_errors_name_the_field(tmp_path):
    lm_config.validate_lm_data_config(_cfg())
    with pytest.raises(ValueError, match="'text_train': not set"):
        lm_config.validate_lm_data_config(_cfg(source="text"))
    train = tmp_path / "t.txt"
    train.write_text("x")
    with pytest.raises(ValueError, match="'text_eval': .*does not exist"):
        lm_config.validate_lm_data_config(
            _cfg(source="text", text_train=str(train), text_eval=str(tmp_path / "no.txt"))
        )
    with pytest.raises(ValueError, match="'tokenizer'"):
        lm_config.validate_lm_data_config(_cfg(tokenizer="words"))
    with pytest.raises(ValueError, match="'tokens_per_batch'"):
        lm_config.validate_lm_data_config(_cfg(max_len=256, tokens_per_batch=1024))


def test_text_source_and_an_optional_test_split(tmp_path):
    (tmp_path / "train.txt").write_text("one doc\n\ntwo doc\n")
    (tmp_path / "eval.txt").write_text("three\n")
    cfg = _cfg(
        source="text", text_train=str(tmp_path / "train.txt"), text_eval=str(tmp_path / "eval.txt")
    )
    assert read_documents(cfg, "train") == ["one doc", "two doc"]
    assert read_documents(cfg, "test") == []
    assert (
        pipeline.make_lm_eval_batches(
            cfg, ByteTokenizer(), "test", process_count=1, process_index=0
        )
        == []
    )


def test_tfds_text_dataset_through_mock_data():
    cfg = _cfg(source="tfds", tfds_name="tiny_shakespeare", eval_split="validation")
    with tfds.testing.mock_data(num_examples=5):
        records = tfds.data_source("tiny_shakespeare", split="validation")
        expected = [records[i]["text"] for i in range(5)]
        documents = read_documents(cfg, "eval")
        with pytest.raises(ValueError, match="no feature 'body'"):
            read_documents(
                _cfg(source="tfds", tfds_name="tiny_shakespeare", tfds_text_key="body"), "eval"
            )
    assert documents == [e.replace("\r\n", "\n") for e in expected if e.strip()]
    assert documents and all(isinstance(d, str) for d in documents)


def test_sentencepiece_for_documents_never_needs_unk_and_is_kept_in_the_workdir(tmp_path):
    text = "\n\n".join(sorted(pydoc_data.topics.topics.values())[:40])
    (tmp_path / "train.txt").write_text(text)
    (tmp_path / "eval.txt").write_text("x")
    cfg = _cfg(
        source="text",
        text_train=str(tmp_path / "train.txt"),
        text_eval=str(tmp_path / "eval.txt"),
        vocab_size=600,
    )
    workdir = tmp_path / "run"
    tokenizer = pipeline.load_lm_tokenizer(cfg, workdir)
    unseen = "Ünïcödé ✓ 漢字\n\n\tindented  twice"  # characters the training text lacks
    ids = tokenizer.encode(unseen)
    assert tokenizer.unk_id not in ids and tokenizer.decode(ids) == unseen
    assert (workdir / "tokenizer.model").is_file()
    again = pipeline.load_lm_tokenizer(cfg, workdir)  # read back, not retrained
    assert again.model_proto == tokenizer.model_proto
    cfg.vocab_size = 700
    with pytest.raises(ValueError, match="vocab_size"):
        pipeline.load_lm_tokenizer(cfg, workdir)

    cfg.spm_model_path = str(workdir / "tokenizer.model")  # a given model is kept in a new run
    given = pipeline.load_lm_tokenizer(cfg, tmp_path / "given")
    assert (tmp_path / "given" / "tokenizer.model").read_bytes() == tokenizer.model_proto
    assert given.model_proto == tokenizer.model_proto
    cfg.vocab_size, cfg.spm_model_path = 500, None
    pipeline.load_lm_tokenizer(cfg, tmp_path / "other")
    cfg.spm_model_path = str(tmp_path / "other" / "tokenizer.model")  # not "given"'s model
    with pytest.raises(ValueError, match="is not the tokenizer .* was started with"):
        pipeline.load_lm_tokenizer(cfg, tmp_path / "given")
