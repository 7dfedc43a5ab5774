"""The text readers on hostile files: arbitrary Unicode, NUL bytes, byte-order marks, CRLF,
1 MB lines, invalid UTF-8, UTF-16, empty files.

Properties: a file either reads back exactly the lines (pairs, rows, documents) it was written
from, in order, or raises ValueError naming the file and the line of the first bad byte.
"""

from __future__ import annotations

import codecs
import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.robustness.hostile import (
    NEAR_TEXT,
    expected_error_line,
    first_line_ok,
    fuzz,
    hostile_line,
    text_file,
)
from transformer_jax.data.classify.tsv import read_tsv_rows
from transformer_jax.data.files import decode_utf8, read_text, split_lines
from transformer_jax.data.lm.sources import read_text_documents
from transformer_jax.data.translation.text_files import read_aligned, read_tsv


@fuzz("decode_utf8")
@given(st.one_of(st.binary(max_size=64), NEAR_TEXT))
def test_decode_utf8_returns_the_text_or_names_the_first_bad_line(data):
    line = expected_error_line(data)
    if line is None:
        assert decode_utf8(data, "f.txt") == data.decode("utf-8").removeprefix("\ufeff")
        return
    with pytest.raises(ValueError) as error:
        decode_utf8(data, "f.txt")
    message = str(error.value)
    assert message.startswith(f"f.txt:{line}: "), (message, line)
    assert "Convert" in message  # What to do.


@pytest.mark.parametrize(
    "data, problem",
    [
        ("one\ntwo\n".encode("utf-16"), "the text is UTF-16"),
        ("one\n".encode("utf-16-le"), "f.txt:1: NUL byte at column 2"),  # No mark: NULs.
        ("one\n".encode("utf-32"), "the text is UTF-32"),
        (b"one\ntw\xe9\n", "f.txt:2: invalid UTF-8 (byte 0xe9 at column 3)"),
        (b"one\ntwo\x00\n", "f.txt:2: NUL byte at column 4"),
    ],
)
def test_decode_utf8_messages_say_what_and_where(data, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        decode_utf8(data, "f.txt")


@pytest.mark.parametrize(
    "content", [b"", b"\n\r\n  \t\n", codecs.BOM_UTF8, codecs.BOM_UTF8 + b" \n"]
)
def test_empty_files_are_refused_by_name(tmp_path, content):
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(f"{path}:1: the file is empty")):
        read_text(path)


def test_split_lines_only_splits_on_newline():
    assert split_lines("a\u2028b\x85c\x0bd\x0ce\x1cf\rg\r\nh\n") == [
        "a\u2028b\x85c\x0bd\x0ce\x1cf\rg",
        "h",
    ]
    assert split_lines("\n") == [""] and split_lines("") == []


same_length_lists = st.integers(1, 8).flatmap(
    lambda n: st.tuples(*[st.lists(hostile_line(), min_size=n, max_size=n)] * 2)
)


@fuzz("read_aligned")
@given(same_length_lists.filter(lambda p: first_line_ok(p[0]) and first_line_ok(p[1])), st.data())
def test_aligned_files_read_back_pair_for_pair(tmp_path_factory, lists, data):
    src_lines, tgt_lines = lists
    assume(any(line.strip() for line in src_lines) and any(line.strip() for line in tgt_lines))
    folder = tmp_path_factory.mktemp("aligned")
    src, tgt = folder / "src.txt", folder / "tgt.txt"
    src.write_bytes(data.draw(text_file(src_lines)))
    tgt.write_bytes(data.draw(text_file(tgt_lines)))
    assert read_aligned(src, tgt) == list(zip(src_lines, tgt_lines, strict=True))
    extra = data.draw(st.integers(1, 3))
    tgt.write_bytes(data.draw(text_file(tgt_lines + ["extra"] * extra)))
    with pytest.raises(ValueError, match=re.escape(f"{tgt}:{len(src_lines) + 1}: line has no")):
        read_aligned(src, tgt)


@fuzz("read_tsv")
@given(
    st.lists(
        st.tuples(hostile_line(exclude="\t"), hostile_line(exclude="\t")), min_size=1, max_size=8
    ),
    st.data(),
)
def test_tsv_pairs_read_back_or_the_first_line_without_one_tab_is_named(
    tmp_path_factory, pairs, data
):
    lines = [f"{a}\t{b}" for a, b in pairs]
    path = tmp_path_factory.mktemp("tsv") / "pairs.tsv"
    assume(first_line_ok(lines) and "".join(lines).strip())  # A blank file is "empty".
    path.write_bytes(data.draw(text_file(lines)))
    assert read_tsv(path) == pairs
    bad = data.draw(st.integers(0, len(lines)))
    broken = lines[:bad] + [data.draw(st.sampled_from(["no tab", "a\tb\tc", ""]))] + lines[bad:]
    path.write_bytes(data.draw(text_file(broken)))
    with pytest.raises(ValueError, match=re.escape(f"{path}:{bad + 1}: line has")):
        read_tsv(path)


label = st.sampled_from(["pos", "neg", "ünï", "🙂"])
field = hostile_line(12, exclude="\t").filter(str.strip)


@fuzz("classify_tsv")
@given(st.lists(st.tuples(label, field), min_size=1, max_size=8), st.data())
def test_classify_tsv_rows_keep_their_line_numbers(tmp_path_factory, rows, data):
    lines = [f"{name}\t{text}" for name, text in rows]
    blanks = data.draw(st.lists(st.integers(0, len(lines)), max_size=3))
    for at in sorted(blanks, reverse=True):
        lines.insert(at, data.draw(st.sampled_from(["", " ", "\t \u3000"])))
    assume(first_line_ok(lines))
    path = tmp_path_factory.mktemp("cls") / "train.tsv"
    path.write_bytes(data.draw(text_file(lines)))
    got = read_tsv_rows(str(path))
    assert [fields for _, fields in got] == [[n, t] for n, t in rows]
    assert [lines[number - 1] for number, _ in got] == [f"{n}\t{t}" for n, t in rows]


paragraph = st.lists(
    hostile_line(12, exclude="\r\x1e").filter(lambda s: s.strip(" \t")), min_size=1, max_size=3
).map("\n".join)


@fuzz("lm_documents")
@given(st.lists(paragraph, min_size=1, max_size=5), st.data())
def test_lm_documents_are_the_paragraphs_and_the_separator_is_named(tmp_path_factory, paras, data):
    assume(all(p.strip() for p in paras) and first_line_ok(paras))
    gaps = [data.draw(st.sampled_from(["\n", "\n \n", "\n\t\n\n"])) for _ in paras]
    lines = split_lines("\n".join(p + gap for p, gap in zip(paras, gaps, strict=True)))
    path = tmp_path_factory.mktemp("lm") / "doc.txt"
    path.write_bytes(data.draw(text_file(lines)))
    assert read_text_documents(path, "blank_lines") == [p.strip() for p in paras]
    whole = "\n".join(lines).strip()
    assert read_text_documents(path, "file") == [whole]
    path.write_bytes(data.draw(text_file([*lines, "a\x1eb"])))
    with pytest.raises(ValueError, match=re.escape(f"{path}: contains the control character")):
        read_text_documents(path, "file")


def test_one_megabyte_lines_read_whole(tmp_path):
    long = "x" * 1_000_000
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text(f"a\r\n{long}\r\nb\r\n")
    tgt.write_text(f"1\n2{long}\n3")
    assert read_aligned(src, tgt) == [("a", "1"), (long, "2" + long), ("b", "3")]
