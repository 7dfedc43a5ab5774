"""Helpers for the hostile-input tests: hypothesis settings, hostile text, in-process CLI runs.

Every property test here draws at most `EXAMPLES[target]` inputs (the "inputs fuzzed per
target"), with no deadline (a first example may compile) and no example database (nothing is
written into the repository).
"""

from __future__ import annotations

import codecs
import contextlib
import io
import sys
import warnings

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Inputs fuzzed per target: cheap readers get many, CLIs that run a model a few dozen.
EXAMPLES = {
    "decode_utf8": 300,
    "read_aligned": 100,
    "read_tsv": 100,
    "classify_tsv": 100,
    "lm_documents": 100,
    "cli_bytes": 25,  # per CLI: random bytes on stdin
    "translate": 25,
    "generate": 15,
    "classify": 25,
    "fill_mask": 25,
    "config_fields": 400,
}


def fuzz(target: str):
    """The hypothesis settings of one target."""
    return settings(
        max_examples=EXAMPLES[target],
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


# Characters that break naive line handling, mixed into arbitrary Unicode.
TRICKY = ["\r", "\t", " ", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1e",
          "\ufeff", "\u200b", "\ud7ff", "\U0010ffff", "\u0301", "é", "日本", "🙂", "\\", "\\n",
          '"']  # fmt: skip
CHARS = st.one_of(
    st.characters(codec="utf-8", exclude_characters="\n\x00"),  # No surrogates: not UTF-8.
    st.sampled_from(TRICKY),
)


def hostile_line(max_size: int = 30, exclude: str = "") -> st.SearchStrategy[str]:
    """One line of arbitrary text: no "\\n", no NUL, not ending in "\\r" (which a "\\n" after it
    would make a CRLF), none of `exclude`."""
    chars = CHARS.filter(lambda c: not set(c) & set(exclude)) if exclude else CHARS
    return st.lists(chars, max_size=max_size).map("".join).filter(lambda s: not s.endswith("\r"))


@st.composite
def text_file(draw, lines: list[str]) -> bytes:
    """`lines` as a file would hold them: each ended by "\\n" or "\\r\\n" (mixed), maybe a
    byte-order mark, maybe no line end after the last (non-empty) line."""
    bom = "\ufeff" if draw(st.booleans()) else ""
    if not lines:
        return bom.encode()
    ends = [draw(st.sampled_from(["\n", "\r\n"])) for _ in lines]
    if lines[-1] and draw(st.booleans()):
        ends[-1] = ""
    return (bom + "".join(line + end for line, end in zip(lines, ends, strict=True))).encode()


def first_line_ok(lines: list[str]) -> bool:
    """A text starting with U+FEFF would lose it as a byte-order mark."""
    return not lines or not lines[0].startswith("\ufeff")


def expected_error_line(data: bytes) -> int | None:
    """The line of the first byte `decode_utf8` must refuse, by an oracle of its own: a UTF-16/32
    byte-order mark (line 1), a NUL, or the first byte that does not decode; None if none."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return 1  # (The UTF-32 marks start like these.)
    bad = [data.find(b"\x00")] if b"\x00" in data else []
    for i in range(len(data) + 1):  # The shortest undecodable prefix ends at the first bad byte.
        try:
            data[:i].decode("utf-8")
        except UnicodeDecodeError as e:
            if e.reason != "unexpected end of data":
                bad.append(e.start)
                break
    else:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:  # Truncated at the very end.
            bad.append(e.start)
    return data.count(b"\n", 0, min(bad)) + 1 if bad else None


BOMS = [codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE]
# Bytes that are mostly text, with now and then a byte no UTF-8 text has.
NEAR_TEXT = st.lists(
    st.one_of(
        hostile_line(8).map(str.encode),
        st.sampled_from([b"\n", b"\r\n", b"\x00", b"\xff", b"\xe9", b"\xc3", b"\xed\xa0\x80"]),
        st.sampled_from(BOMS),
    ),
    max_size=12,
).map(b"".join)


class _Stdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)


@contextlib.contextmanager
def _swapped(stdin: bytes):
    out, err = io.BytesIO(), io.StringIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    wrapper = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    sys.stdin, sys.stdout, sys.stderr = _Stdin(stdin), wrapper, err
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        wrapper.detach()  # Leaves `out` open for the caller.


def run_cli(main, argv: list[str], stdin: bytes = b"") -> tuple[int, bytes, str]:
    """(exit code, stdout bytes, stderr text) of a CLI's `main(argv)` run in this process."""
    with _swapped(stdin) as (out, err), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Truncation warnings: tested where they matter.
        code = main(argv)
        sys.stdout.flush()
    return code, out.getvalue(), err.getvalue()
