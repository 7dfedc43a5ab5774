"""The floors a language model must beat, in bits per byte of the same text: general-purpose
compressors (zlib level 9, lzma preset 9 | extreme) and a character bigram model.

A compressor's bits per byte is 8 x compressed size / original size. The bigram model is fitted
on the training text and scores the evaluated text as -log2 p(text) / bytes, with
p(c_i | c_{i-1}) interpolated Witten-Bell style between the bigram counts and a unigram
distribution that itself keeps some mass for characters never seen in training (spelled as
UTF-8 bytes at 8 bits each). Documents are joined as `doc SEPARATOR`, the same bytes the
model's bits per byte counts.
"""

from __future__ import annotations

import collections
import lzma
import math
import zlib
from collections.abc import Sequence

from transformer_jax.data.lm.rows import SEPARATOR


def joined(documents: Sequence[str]) -> str:
    """The byte stream every measure sees: each document followed by `SEPARATOR`."""
    return "".join(d + SEPARATOR for d in documents)


def zlib_bits_per_byte(data: bytes) -> float:
    """8 x len(zlib level 9) / len(data)."""
    return 8.0 * len(zlib.compress(data, 9)) / len(data)


def lzma_bits_per_byte(data: bytes) -> float:
    """8 x len(xz, preset 9 | extreme) / len(data)."""
    return 8.0 * len(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)) / len(data)


class CharBigram:
    """A character bigram model with Witten-Bell interpolation (no tuned constants)."""

    def __init__(self, train_text: str):
        if not train_text:
            raise ValueError("CharBigram needs non-empty training text.")
        self._unigram = collections.Counter(train_text)
        self._total = len(train_text)
        self._bigram: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for prev, char in zip(train_text, train_text[1:], strict=False):
            self._bigram[prev][char] += 1
        self._follow_totals = {p: sum(c.values()) for p, c in self._bigram.items()}

    def _unigram_bits(self, char: str) -> float:
        # Witten-Bell at the unigram level: mass types/(tokens+types) goes to unseen characters,
        # which are then spelled out as their UTF-8 bytes (8 bits each).
        types = len(self._unigram)
        seen = self._unigram.get(char, 0)
        if seen:
            return -math.log2(seen / (self._total + types))
        return -math.log2(types / (self._total + types)) + 8 * len(char.encode("utf-8"))

    def bits(self, text: str) -> float:
        """-log2 p(text), the first character scored by the unigram model."""
        total = self._unigram_bits(text[0]) if text else 0.0
        for prev, char in zip(text, text[1:], strict=False):
            follows = self._bigram.get(prev)
            unigram_bits = self._unigram_bits(char)
            if not follows:
                total += unigram_bits
                continue
            n, types = self._follow_totals[prev], len(follows)
            p = (follows.get(char, 0) + types * 2.0**-unigram_bits) / (n + types)
            total += -math.log2(p)
        return total

    def bits_per_byte(self, text: str) -> float:
        """-log2 p(text) / UTF-8 bytes of text."""
        return self.bits(text) / len(text.encode("utf-8"))


def baselines(train_documents: Sequence[str], documents: Sequence[str]) -> dict[str, float]:
    """Bits per byte of `documents` under zlib, lzma and a bigram fitted on the training ones."""
    text = joined(documents)
    data = text.encode("utf-8")
    return {
        "zlib_bits_per_byte": zlib_bits_per_byte(data),
        "lzma_bits_per_byte": lzma_bits_per_byte(data),
        "bigram_bits_per_byte": CharBigram(joined(train_documents)).bits_per_byte(text),
    }
