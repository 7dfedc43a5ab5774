"""Byte-level tokens: every UTF-8 byte is one token, shifted past the four special ids.

    tokenizer = ByteTokenizer()
    tokenizer.encode("né")  # [114, 199, 173]: bytes 0x6E, 0xC3, 0xA9 plus 4
    tokenizer.vocab_size  # 260 = 256 bytes + pad, eos, bos, unk

Nothing to train and nothing to store: any text round-trips exactly, and a model's bits per
token are its bits per byte. Ids: pad=0, eos=1, bos=2, unk=3 (never produced by `encode`),
byte b -> b + 4.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from transformer_jax.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

OFFSET = 4  # Ids below this are the special tokens.
_SPECIAL_PIECES = {PAD_ID: "<pad>", EOS_ID: "</s>", BOS_ID: "<s>", UNK_ID: "<unk>"}


class ByteTokenizer:
    """The same interface as `Tokenizer` (SentencePiece), over raw UTF-8 bytes."""

    pad_id, eos_id, bos_id, unk_id = PAD_ID, EOS_ID, BOS_ID, UNK_ID
    add_bos = True  # A text's ids start with bos, as in training (see Tokenizer.add_bos).
    vocab_size = 256 + OFFSET
    fingerprint = "bytes-v1"  # Keys caches of tokenized data, like Tokenizer.fingerprint.

    def encode(self, text: str) -> list[int]:
        """Returns the ids of `text`'s UTF-8 bytes (no bos, no eos)."""
        return (np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int64) + OFFSET).tolist()

    def encode_batch(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        """Returns the ids of each text (`num_threads` is accepted for interface parity)."""
        del num_threads
        return [self.encode(t) for t in texts]

    def decode(self, ids: Iterable[int | np.integer] | np.ndarray) -> str:
        """Returns the text of `ids`, stopping at the first eos and skipping the other special
        ids; an incomplete or invalid UTF-8 sequence becomes U+FFFD."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        eos = np.flatnonzero(ids == EOS_ID)
        if eos.size:
            ids = ids[: eos[0]]
        ids = ids[(ids >= OFFSET) & (ids < self.vocab_size)]
        return (ids - OFFSET).astype(np.uint8).tobytes().decode("utf-8", errors="replace")

    def id_to_piece(self, i: int) -> str:
        """Returns "<0x41>" for byte 0x41, or the special piece ("<pad>", "</s>", ...)."""
        i = int(i)
        if i < OFFSET:
            return _SPECIAL_PIECES[i]
        return f"<0x{i - OFFSET:02X}>"
