"""Reading the user's text files: UTF-8 only, with errors that name the file, line and byte.

Shared by every task's local-text source (translation pairs, language-model documents).
"""

from __future__ import annotations

import os
import pathlib

from transformer_jax import storage


def read_text(path: str | os.PathLike) -> str:
    """Reads a whole UTF-8 file (a leading byte-order mark is dropped).

    Args:
      path: the file (local or a gs:// URI).

    Returns:
      Its text, line ends as written.

    Raises:
      FileNotFoundError: the file does not exist.
      ValueError: the file is empty (or only whitespace) or not valid UTF-8 (naming the line
        and column of the first bad byte).
    """
    path = storage.as_path(path)  # Local, or gs:// and other etils.epath schemes.
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file. Check the text_* fields of the config.")
    data = path.read_bytes()
    if not data.strip():
        raise ValueError(f"{path}:1: the file is empty. Give a file with text in it.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise ValueError(
            f"{path}:{line}: invalid UTF-8 (byte 0x{data[e.start]:02x} at column {column}). "
            f"Convert the file to UTF-8, e.g. `iconv -f latin1 -t utf-8`."
        ) from None
    return text.removeprefix("\ufeff")


def file_fingerprint(*paths: str | os.PathLike) -> str:
    """Identifies files by absolute path, size and modification time (for cache keys)."""
    parts = []
    for path in paths:
        stat = pathlib.Path(path).stat()
        parts.append(f"{pathlib.Path(path).resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)
