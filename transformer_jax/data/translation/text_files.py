"""Local parallel text: two aligned files (one sentence a line) or one tab-separated file.

Lines end with "\\n" (a trailing "\\r" is dropped, so CRLF files work); no other character splits
a line, unlike `str.splitlines`, which would also split on U+2028 and friends and break alignment.
Every problem is reported as `path:line: what is wrong. What to do.`
"""

from __future__ import annotations

import os

from transformer_jax.data.files import file_fingerprint, read_text, split_lines

__all__ = ["file_fingerprint", "read_aligned", "read_lines", "read_tsv"]


def read_lines(path: str | os.PathLike) -> list[str]:
    """Reads a UTF-8 text file as a list of lines without their line ends.

    Args:
      path: the file.

    Returns:
      The lines; a final line end does not start an extra empty line.

    Raises:
      FileNotFoundError: the file does not exist.
      ValueError: the file is empty, not valid UTF-8 or holds a NUL byte (naming the line).
    """
    return split_lines(read_text(path))


def read_aligned(src_path: str | os.PathLike, tgt_path: str | os.PathLike) -> list[tuple[str, str]]:
    """Reads two aligned files into (source, target) pairs.

    Args:
      src_path: source sentences, one a line.
      tgt_path: target sentences, line i translating line i of the source.

    Returns:
      The pairs, in file order.

    Raises:
      ValueError: a file is empty or not UTF-8, or the line counts differ.
    """
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        shorter, longer = (src_path, tgt_path) if len(src) < len(tgt) else (tgt_path, src_path)
        first_unmatched = min(len(src), len(tgt)) + 1
        raise ValueError(
            f"{longer}:{first_unmatched}: line has no counterpart in {shorter} "
            f"({src_path} has {len(src)} lines, {tgt_path} has {len(tgt)}). "
            f"The files must be aligned line by line: fix or remove the extra lines."
        )
    return list(zip(src, tgt, strict=True))


def read_tsv(path: str | os.PathLike) -> list[tuple[str, str]]:
    """Reads a file of `source<TAB>target` lines into pairs.

    Args:
      path: the TSV file.

    Returns:
      The pairs, in file order.

    Raises:
      ValueError: the file is empty or not UTF-8, or a line has no tab or more than one.
    """
    pairs = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            problem = "has no tab" if len(fields) == 1 else f"has {len(fields) - 1} tabs"
            raise ValueError(
                f"{path}:{number}: line {problem}; expected exactly one between source and "
                f"target. Write each pair as `source<TAB>target`."
            )
        pairs.append((fields[0], fields[1]))
    return pairs
