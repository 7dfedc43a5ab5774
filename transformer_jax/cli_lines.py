"""Lines in and out of the command lines that answer line by line (translate, generate,
classify, fill_mask, classify_image).

In: a file (`--input`) or standard input, read as bytes and checked by
`transformer_jax.data.files.decode_utf8`: a leading byte-order mark is dropped; invalid UTF-8,
UTF-16/32 text or a NUL byte is an error naming the input, the line and the column (nothing is
silently replaced). Lines are split by `transformer_jax.data.files.split_lines`: on "\\n" only,
CRLF works, and U+2028, U+0085, form feeds and lone "\\r"s stay inside their line (unlike
`str.splitlines`). An empty input is zero lines. Texts given as arguments
(`--text`, `--prompt`) must be valid Unicode too (a shell can pass undecodable bytes).

Out: exactly one line per input line, in order. `one_line` turns line breaks inside an answer
into spaces (generate escapes them instead, to keep the text exact).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import BinaryIO

from transformer_jax.data.files import decode_utf8, split_lines

STDIN = "<stdin>"  # How errors name standard input.


def quiet_logs() -> None:
    """Keep stderr for warnings and the progress bar (Orbax logs every restore at INFO)."""
    logging.getLogger("absl").setLevel(logging.WARNING)


def read_input_lines(path: str | os.PathLike | None = None) -> list[str]:
    """The lines of a UTF-8 file, or of standard input when `path` is None.

    Raises:
      ValueError: invalid UTF-8, UTF-16/32 or a NUL byte (naming input, line and column).
      OSError: the file cannot be read.
    """
    if path is None:
        data, where = sys.stdin.buffer.read(), STDIN
    else:
        with open(path, "rb") as f:
            data, where = f.read(), os.fspath(path)
    return split_lines(decode_utf8(data, where))


def input_name(number: int, flag: str | None = None) -> str:
    """How an error names input number `number` (from 1): line 3 of stdin is `<stdin>:3`, the
    third `--text` argument `--text #3`."""
    return f"{flag} #{number}" if flag else f"{STDIN}:{number}"


def check_arguments(texts: Sequence[str], flag: str) -> list[str]:
    """`texts` given as command-line arguments, refused if a shell passed undecodable bytes
    (Python keeps them as lone surrogates, which no tokenizer or output can take)."""
    for number, text in enumerate(texts, start=1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            byte = ord(text[e.start]) & 0xFF  # A surrogate U+DC80..U+DCFF keeps the raw byte.
            raise ValueError(
                f"{input_name(number, flag)}: not valid UTF-8 (byte 0x{byte:02x} at character "
                f"{e.start + 1}). Pass UTF-8 text."
            ) from None
    return list(texts)


def one_line(text: str) -> str:
    """`text` with each line break ("\\r\\n", "\\r" or "\\n") made a space: one output line."""
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def write_lines(lines: Sequence[str], file: BinaryIO | None = None) -> None:
    """Writes `lines` (each without line breaks), each ended by "\\n", as UTF-8, to a binary
    `file` or to standard output. File names that are not UTF-8 are written as their bytes."""
    data = "".join(line + "\n" for line in lines).encode("utf-8", errors="surrogateescape")
    if file is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        file.write(data)
