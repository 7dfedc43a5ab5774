"""Documents -> tokens -> packed rows of fixed length, as pure numpy.

A document of n tokens is the sequence `BOS t_1 .. t_n EOS`; the model reads `BOS t_1 .. t_n`
and predicts `t_1 .. t_n EOS`: n + 1 predictions, the last one saying where the document ends.
BOS and EOS are the tokenizer's own ids (`transformer_jax.tokens` for the project's
tokenizers). GPT-2's one special token `<|endoftext|>` is both: a document then reads
`<|endoftext|> text <|endoftext|>`, as GPT-2 saw documents in its training stream, each
between two separators.
A document with more than `max_len` predictions is cut into chunks of `max_len` (never
dropped); each chunk is predicted without the previous chunk's context. Chunks are packed into
rows of `max_len` (best fit, in a per-epoch shuffled order), each chunk a segment of its own
with positions from 0, so no document attends to another (see `DecoderOnly`).

Bits per byte: each document counts its UTF-8 bytes plus one for its end (the separator a
compressor would need, `SEPARATOR`); that count is credited at the position predicting its EOS,
so summing the `bytes` array over any set of complete documents gives their bytes exactly.

Batch keys, all `[rows, max_len]`: `inputs`, `targets` (int32), `weights` (1.0 on real
predictions), `segment_ids` (1, 2, .. per row; 0 = padding), `positions`, `bytes` (float32).
Weights and segment ids come from the chunks' lengths, never from token values: a real token
whose id is the project's padding id 0 (GPT-2's "!") is read and predicted like any other.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence

import numpy as np

SEPARATOR = "\x1e"  # Ends each document in the byte stream compressors see (one byte).
BATCH_KEYS = ("inputs", "targets", "weights", "segment_ids", "positions", "bytes")
FLOAT_KEYS = ("weights", "bytes")  # float32; the other keys are int32.


@dataclasses.dataclass(frozen=True)
class TokenizedDocuments:
    """Documents as one flat id array.

    Attributes:
      ids: int32 [total]; document i is `ids[offsets[i]:offsets[i + 1]]` = BOS, tokens, EOS.
      offsets: int64 [n + 1].
      num_bytes: int64 [n]; UTF-8 bytes of document i plus one for its end.
    """

    ids: np.ndarray
    offsets: np.ndarray
    num_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.num_bytes)

    @property
    def num_predictions(self) -> int:
        """Tokens predicted over all documents (each document's tokens and its EOS)."""
        return int(self.offsets[-1] - len(self))


def tokenize_documents(tokenizer, texts: Sequence[str]) -> TokenizedDocuments:
    """Encodes each text as BOS, its tokens, EOS, with the tokenizer's `bos_id` and `eos_id`
    (any tokenizer of the project: `Tokenizer`, `ByteTokenizer`, a converted one)."""
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    encoded = tokenizer.encode_batch(list(texts)) if texts else []
    lengths = np.array([len(e) + 2 for e in encoded], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = np.empty(int(offsets[-1]), np.int32)
    for start, tokens in zip(offsets[:-1], encoded, strict=True):
        ids[start] = bos
        ids[start + 1 : start + 1 + len(tokens)] = tokens
        ids[start + 1 + len(tokens)] = eos
    num_bytes = np.array([len(t.encode("utf-8")) + 1 for t in texts], np.int64)
    return TokenizedDocuments(ids, offsets, num_bytes)


@dataclasses.dataclass(frozen=True)
class Chunks:
    """Pieces of documents of at most `max_len` predictions each.

    Attributes:
      starts: int64 [K]; the chunk's inputs are `ids[start : start + length]`, its targets the
        same shifted by one.
      lengths: int64 [K]; predictions in the chunk (1 .. max_len).
      num_bytes: int64 [K]; the document's bytes on its last chunk, 0 on the others.
    """

    starts: np.ndarray
    lengths: np.ndarray
    num_bytes: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)


def chunk_documents(docs: TokenizedDocuments, max_len: int) -> Chunks:
    """Cuts every document into chunks of at most `max_len` predictions, in document order."""
    predictions = np.diff(docs.offsets) - 1  # per document: tokens + EOS
    counts = -(-predictions // max_len)  # ceil
    doc_of_chunk = np.repeat(np.arange(len(docs)), counts)
    first_chunk = np.concatenate([[0], np.cumsum(counts)])[:-1]
    k = np.arange(len(doc_of_chunk)) - first_chunk[doc_of_chunk]  # chunk number in its doc
    starts = docs.offsets[doc_of_chunk] + k * max_len
    lengths = np.minimum(max_len, predictions[doc_of_chunk] - k * max_len)
    last = k == counts[doc_of_chunk] - 1
    num_bytes = np.where(last, docs.num_bytes[doc_of_chunk], 0)
    return Chunks(starts.astype(np.int64), lengths.astype(np.int64), num_bytes.astype(np.int64))


def pack(lengths: np.ndarray, max_len: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Best-fit packing: each item goes to the open row with the least room that holds it.

    Args:
      lengths: int [K], each in 1 .. max_len, in the order to place them.
      max_len: row length.

    Returns:
      (row [K], column [K], number of rows); rows are numbered in order of opening.
    """
    rows = np.empty(len(lengths), np.int64)
    cols = np.empty(len(lengths), np.int64)
    room_sizes: list[int] = []  # sorted distinct free sizes of open rows
    rows_with_room: dict[int, list[int]] = {}
    used: list[int] = []
    for k, n in enumerate(lengths.tolist()):
        i = bisect.bisect_left(room_sizes, n)
        if i < len(room_sizes):
            room = room_sizes[i]
            row = rows_with_room[room].pop()
            if not rows_with_room[room]:
                del rows_with_room[room]
                room_sizes.pop(i)
        else:
            room, row = max_len, len(used)
            used.append(0)
        rows[k], cols[k] = row, used[row]
        used[row] += n
        if room > n:
            if room - n not in rows_with_room:
                bisect.insort(room_sizes, room - n)
                rows_with_room[room - n] = []
            rows_with_room[room - n].append(row)
    return rows, cols, len(used)


def empty_batch(rows: int, max_len: int) -> dict[str, np.ndarray]:
    """All-padding arrays of every batch key."""
    return {
        k: np.zeros((rows, max_len), np.float32 if k in FLOAT_KEYS else np.int32)
        for k in BATCH_KEYS
    }


class PackedEpoch(Sequence):
    """One epoch's global batches, packed in a given chunk order, sliced to this host's rows.

    Every host computes the same plan (documents, chunk order, packing) and reads its own
    `rows_per_batch / process_count` rows of each batch; the last batch is padded with empty
    rows, so nothing is dropped and every host has the same number of batches.
    """

    def __init__(
        self,
        docs: TokenizedDocuments,
        chunks: Chunks,
        order: np.ndarray,
        max_len: int,
        rows_per_batch: int,
        process_index: int = 0,
        process_count: int = 1,
    ):
        if rows_per_batch % process_count:
            raise ValueError(
                f"{rows_per_batch} rows per batch do not split over {process_count} processes."
            )
        rows, cols, num_rows = pack(chunks.lengths[order], max_len)
        by_row = np.argsort(rows, kind="stable")  # chunks of a row stay in packing order
        self._chunk = order[by_row]
        self._row, self._col = rows[by_row], cols[by_row]
        self._docs, self._chunks, self._max_len = docs, chunks, max_len
        self._rows = rows_per_batch // process_count
        self._first = process_index * self._rows  # this host's first row within a batch
        self._rows_per_batch = rows_per_batch
        self.num_rows = num_rows
        self._len = math.ceil(num_rows / rows_per_batch)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if not 0 <= i < self._len:
            raise IndexError(f"batch {i} of an epoch of {self._len}")
        first_row = i * self._rows_per_batch + self._first
        lo, hi = np.searchsorted(self._row, [first_row, first_row + self._rows])
        batch = empty_batch(self._rows, self._max_len)
        ids, chunks = self._docs.ids, self._chunks
        segment = np.zeros(self._rows, np.int32)
        for j in range(lo, hi):
            k, r, c = self._chunk[j], self._row[j] - first_row, self._col[j]
            n, s = chunks.lengths[k], chunks.starts[k]
            segment[r] += 1
            batch["inputs"][r, c : c + n] = ids[s : s + n]
            batch["targets"][r, c : c + n] = ids[s + 1 : s + 1 + n]
            batch["weights"][r, c : c + n] = 1.0
            batch["segment_ids"][r, c : c + n] = segment[r]
            batch["positions"][r, c : c + n] = np.arange(n)
            batch["bytes"][r, c + n - 1] = chunks.num_bytes[k]
        return batch
