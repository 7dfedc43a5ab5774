"""Reading the user's text: UTF-8 only, with errors that name the file, line and column.

Shared by every task's local-text source (translation pairs, language-model documents, TSV
examples) and by the command lines' input (`transformer_jax.cli.common`). What is accepted:

* UTF-8, with or without a leading byte-order mark (dropped);
* "\n" or "\r\n" line ends (`split_lines`); no other character ends a line.

What is refused, naming the line and column of the first offending byte and what to do:

* invalid UTF-8 (e.g. a Latin-1 or Windows-1252 file);
* a UTF-16 or UTF-32 file (its byte-order mark, or the NUL bytes its ASCII characters carry);
* any other NUL byte: text files never contain one, binary files almost always do.
"""

from __future__ import annotations

import codecs
import os
import pathlib

from transformer_jax import storage

_WIDE_BOMS = (  # Longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
    (codecs.BOM_UTF32_LE, "UTF-32", "utf-32"),
    (codecs.BOM_UTF32_BE, "UTF-32", "utf-32"),
    (codecs.BOM_UTF16_LE, "UTF-16", "utf-16"),
    (codecs.BOM_UTF16_BE, "UTF-16", "utf-16"),
)


def _where(data: bytes, index: int) -> tuple[int, int]:
    """(line, column), both from 1, of byte `index` of `data`; the column counts bytes."""
    line = data.count(b"\n", 0, index) + 1
    return line, index - (data.rfind(b"\n", 0, index) + 1) + 1


def decode_utf8(data: bytes, where: str) -> str:
    """The text of `data`, checked: UTF-8 with a leading byte-order mark dropped.

    Args:
      data: the bytes of a file or of standard input.
      where: how errors name the source, e.g. a path or "<stdin>".

    Returns:
      The text, line ends as written.

    Raises:
      ValueError: `where:line: what is wrong (column). What to do.` for invalid UTF-8, a
        UTF-16/32 file or a NUL byte.
    """
    for bom, name, codec in _WIDE_BOMS:
        if data.startswith(bom):
            raise ValueError(
                f"{where}:1: the text is {name} (it starts with a {name} byte-order mark), not "
                f"UTF-8. Convert it, e.g. `iconv -f {codec} -t utf-8`."
            )
    nul = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if not 0 <= nul < e.start:  # (A NUL before the bad byte is reported below.)
            line, column = _where(data, e.start)
            raise ValueError(
                f"{where}:{line}: invalid UTF-8 (byte 0x{data[e.start]:02x} at column {column}). "
                f"Convert the text to UTF-8, e.g. `iconv -f latin1 -t utf-8`."
            ) from None
    if nul >= 0:
        line, column = _where(data, nul)
        raise ValueError(
            f"{where}:{line}: NUL byte at column {column}: this is binary data or UTF-16/32 "
            f"text, not UTF-8 text. Convert it to UTF-8 (e.g. `iconv -f utf-16 -t utf-8`) or "
            f"remove the NUL bytes."
        )
    return text.removeprefix("\ufeff")


def split_lines(text: str) -> list[str]:
    """The lines of `text` without their ends: split on "\\n" only, a "\\r" before it dropped
    (CRLF works). A final line end does not start an extra empty line; "" has no lines.

    Unlike `str.splitlines`, U+2028, U+0085, form feeds and lone "\\r"s do not end a line:
    lines stay aligned with what `wc -l` and other line-oriented tools count.
    """
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_text(path: str | os.PathLike) -> str:
    """Reads a whole UTF-8 file (see `decode_utf8`; a leading byte-order mark is dropped).

    Args:
      path: the file (local or a gs:// URI).

    Returns:
      Its text, line ends as written.

    Raises:
      FileNotFoundError: the file does not exist.
      ValueError: the file is empty (or only whitespace), not valid UTF-8, UTF-16/32, or holds
        a NUL byte; the message names the line and column.
    """
    path = storage.as_path(path)  # Local, or gs:// and other etils.epath schemes.
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file. Check the text_* fields of the config.")
    text = decode_utf8(path.read_bytes(), str(path))
    if not text.strip():
        raise ValueError(f"{path}:1: the file is empty. Give a file with text in it.")
    return text


def file_fingerprint(*paths: str | os.PathLike) -> str:
    """Identifies files by absolute path, size and modification time (for cache keys)."""
    parts = []
    for path in paths:
        stat = pathlib.Path(path).stat()
        parts.append(f"{pathlib.Path(path).resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)
