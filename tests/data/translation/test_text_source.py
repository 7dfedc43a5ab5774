"""Local text: aligned files and TSV, and errors that name the file and the line."""

import re

import pytest

from transformer_jax.data.translation import get_pairs, read_aligned, read_tsv


def write(path, content):
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(path)


def test_aligned_files(tmp_path):
    src = write(tmp_path / "a.en", "\ufeffone\r\ntwo  spaces\nthree\u2028still three\n")
    tgt = write(tmp_path / "a.fr", "un\r\ndeux  espaces\ntrois\u2028toujours trois")
    assert read_aligned(src, tgt) == [
        ("one", "un"),
        ("two  spaces", "deux  espaces"),
        ("three\u2028still three", "trois\u2028toujours trois"),
    ]


def test_tsv(tmp_path):
    path = write(tmp_path / "train.tsv", "one\tun\nÉlève\télève\n\tempty source\n")
    assert read_tsv(path) == [("one", "un"), ("Élève", "élève"), ("", "empty source")]


def test_mismatched_line_counts_name_file_and_line(tmp_path):
    src = write(tmp_path / "src.txt", "a\nb\nc\n")
    tgt = write(tmp_path / "tgt.txt", "x\ny\n")
    with pytest.raises(ValueError, match=re.escape(f"{src}:3: line has no counterpart in {tgt}")):
        read_aligned(src, tgt)
    with pytest.raises(ValueError, match=re.escape(f"{src}:3:")):
        read_aligned(tgt, src)


def test_empty_file(tmp_path):
    src = write(tmp_path / "src.txt", "a\n")
    tgt = write(tmp_path / "empty.txt", "")
    with pytest.raises(ValueError, match=re.escape(f"{tgt}:1: the file is empty")):
        read_aligned(src, tgt)
    with pytest.raises(ValueError, match=re.escape(f"{tgt}:1: the file is empty")):
        read_tsv(tgt)


def test_invalid_utf8_names_line_and_column(tmp_path):
    src = write(tmp_path / "latin1.txt", "ok\nalso ok\ncaf\xe9\n".encode("latin-1"))
    tgt = write(tmp_path / "tgt.txt", "1\n2\n3\n")
    with pytest.raises(
        ValueError, match=re.escape(f"{src}:3: invalid UTF-8 (byte 0xe9 at column 4)")
    ):
        read_aligned(src, tgt)


def test_tsv_line_without_tab(tmp_path):
    path = write(tmp_path / "bad.tsv", "one\tun\ntwo deux\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: line has no tab")):
        read_tsv(path)
    path = write(tmp_path / "bad2.tsv", "one\tun\ttrois\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}:1: line has 2 tabs")):
        read_tsv(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt: no such file"):
        read_tsv(tmp_path / "nope.txt")


def test_get_pairs_from_text_config_and_shards(tmp_path, make_cfg):
    lines = [f"sentence {i}" for i in range(7)]
    cfg = make_cfg(source="text")
    cfg.text_train_src = write(tmp_path / "tr.en", "\n".join(lines) + "\n")
    cfg.text_train_tgt = write(tmp_path / "tr.fr", "\n".join(s.upper() for s in lines))
    cfg.text_eval_tsv = write(tmp_path / "ev.tsv", "a\tA\nb\tB\n")
    assert get_pairs(cfg, "train") == [(s, s.upper()) for s in lines]
    assert get_pairs(cfg, "eval") == [("a", "A"), ("b", "B")]
    shards = [get_pairs(cfg, "train", process_index=i, process_count=3) for i in range(3)]
    assert [len(s) for s in shards] == [2, 2, 3]
    assert sum(shards, []) == get_pairs(cfg, "train")
    with pytest.raises(ValueError, match="field 'text_test_src': not set for the test split"):
        get_pairs(cfg, "test")
