"""Sentence pairs for next-sentence prediction (BERT §3.1, Appendix A.2), in plain Python.

Each document (a list of tokenized sentences) is walked in order: sentences are gathered into a
chunk of about `max_len - 3` tokens, and the chunk is cut at a random sentence boundary into
segment A and the rest. Half of the time B is that rest, the actual next text (IsNext; a
one-sentence chunk then takes the next sentence too, a document's last lone sentence makes no
pair, and a corpus of one document has only IsNext pairs); otherwise B is taken from a random
sentence of another document onward (NotNext), and the rest of the chunk is not used. With
`groups`, that other document is one of the same group, and in an `aligned` group (documents of
one layout, such as an English sentence then its French) B starts at the sentence where the
true next text would start: another document's French. With `partners`, a document's NotNext
B comes from its own list of documents instead (such as its nearest by shared words). (BERT
walks that rest again; each extra pair it makes is more often NotNext, and the labels drift to
about 60/40 on short documents.) Pairs too long are truncated one
token at a time from the longer segment (alternating its front and back), as in BERT.

`encode_pair` lays a pair out as `[CLS] A [SEP] B [SEP]` with segment ids 0 ... 0 1 ... 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from transformer_jax.tokens import CLS_ID, PAD_ID, SEP_ID

Sentence = Sequence[int]


@dataclasses.dataclass(frozen=True)
class Pair:
    """Two segments and whether B follows A; `source` says where they came from (for tests):
    (document of A, first and end sentence of A, document of B, first and end sentence of B)."""

    a: list[int]
    b: list[int]
    is_next: bool
    source: tuple[int, int, int, int, int, int]


def _truncate(a: list[int], b: list[int], budget: int, rng: np.random.Generator) -> None:
    while len(a) + len(b) > budget:
        longer = a if len(a) >= len(b) else b
        del longer[0 if rng.random() < 0.5 else -1]


def make_pairs(
    documents: Sequence[Sequence[Sentence]],
    rng: np.random.Generator,
    *,
    max_len: int,
    short_prob: float = 0.1,
    groups: Sequence[int] | None = None,
    aligned: Collection[int] = (),
    partners: Mapping[int, Sequence[int]] | None = None,
) -> list[Pair]:
    """NSP pairs from tokenized documents, half IsNext, each fitting `max_len` with 3 specials.

    Args:
      documents: per document its sentences, each a list of token ids (no specials).
      rng: every draw (which boundary, which other document, truncation side).
      max_len: tokens per row, `[CLS]` and two `[SEP]` included.
      short_prob: share of chunks given a shorter random target length (BERT: 0.1), so the
        model also sees short inputs.
      groups: per document its group (None: one group, BERT's); a NotNext B comes from another
        document of the same group, and a document alone in its group makes IsNext pairs only.
      aligned: groups whose NotNext B starts at the sentence where this document's B would.
      partners: document -> the documents its NotNext B is drawn from, in place of its group
        (documents left out use their group; an empty list makes IsNext pairs only).

    Returns:
      The pairs, document by document.
    """
    budget = max_len - 3
    if budget < 2:
        raise ValueError(f"max_len={max_len} leaves no room for two segments and 3 specials.")
    documents = [[list(s) for s in doc if len(s)] for doc in documents]
    groups = [0] * len(documents) if groups is None else list(groups)
    if len(groups) != len(documents):
        raise ValueError(f"{len(groups)} groups for {len(documents)} documents; give one each.")
    members: dict[int, list[int]] = {}
    for d, g in enumerate(groups):
        members.setdefault(g, []).append(d)
    rank = {d: r for ds in members.values() for r, d in enumerate(ds)}  # d's place in its group
    partners = {} if partners is None else partners
    for d, others in partners.items():
        if (
            not 0 <= d < len(documents)
            or d in others
            or not all(0 <= o < len(documents) for o in others)
        ):
            raise ValueError(
                f"partners[{d}] = {list(others)[:8]}: every document and partner must be one of "
                f"the {len(documents)} documents, and a document is not its own partner."
            )
    pairs: list[Pair] = []
    for d, sentences in enumerate(documents):
        group = members[groups[d]]
        pool = partners.get(d)
        can_pair = len(group) > 1 if pool is None else len(pool) > 0
        target = budget if rng.random() >= short_prob else int(rng.integers(2, budget + 1))
        chunk_start, length, i = 0, 0, 0
        while i < len(sentences):
            length += len(sentences[i])
            if i == len(sentences) - 1 or length >= target:
                random_next = can_pair and rng.random() < 0.5
                # A document's last sentence alone has no next text: it makes no pair at all
                # (making it NotNext only would tilt the labels).
                lone_last = i == chunk_start == len(sentences) - 1
                if not random_next and i == chunk_start and i + 1 < len(sentences):
                    i += 1  # IsNext needs a second sentence: take the next one (truncated later)
                chunk = sentences[chunk_start : i + 1]
                if not lone_last:
                    a_end = int(rng.integers(1, len(chunk))) if len(chunk) >= 2 else 1
                    a = [t for s in chunk[:a_end] for t in s]
                    if random_next:
                        if pool is None:
                            other = int(rng.integers(0, len(group) - 1))
                            other = group[other + (other >= rank[d])]  # any in the group but d
                        else:
                            other = int(pool[int(rng.integers(0, len(pool)))])
                        if groups[d] in aligned:
                            start = min(chunk_start + a_end, len(documents[other]) - 1)
                        else:
                            start = int(rng.integers(0, len(documents[other])))
                        end, b = start, []
                        while end < len(documents[other]) and len(a) + len(b) < target:
                            b += documents[other][end]
                            end += 1
                        source = (d, chunk_start, chunk_start + a_end, other, start, end)
                        is_next = False
                    else:
                        b = [t for s in chunk[a_end:] for t in s]
                        source = (d, chunk_start, chunk_start + a_end, d, chunk_start + a_end,
                                  chunk_start + len(chunk))  # fmt: skip
                        is_next = True
                    if a and b:
                        _truncate(a, b, budget, rng)
                        pairs.append(Pair(a, b, is_next, source))
                chunk_start, length = i + 1, 0
                target = budget if rng.random() >= short_prob else int(rng.integers(2, budget + 1))
            i += 1
    return pairs


def encode_pair(pair: Pair, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, segment ids), each int32 [max_len]: `[CLS] A [SEP] B [SEP]`, then padding."""
    tokens = [CLS_ID, *pair.a, SEP_ID, *pair.b, SEP_ID]
    if len(tokens) > max_len:
        raise ValueError(f"pair of {len(tokens)} tokens exceeds max_len={max_len}.")
    segments = [0] * (len(pair.a) + 2) + [1] * (len(pair.b) + 1)
    out = np.full((2, max_len), PAD_ID, np.int32)
    out[0, : len(tokens)], out[1, : len(tokens)] = tokens, segments
    return out[0], out[1]
