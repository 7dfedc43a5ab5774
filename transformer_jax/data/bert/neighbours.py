"""Each document's nearest others by shared tokens, for hard NotNext negatives.

    partners = nearest_documents(documents, members=range(4000, 6500), k=8)
    # {4000: [5213, 4411, ...], ...}: for each member, the k most similar other members

Similarity is the cosine between two documents' counts of tokens and of adjacent token pairs
(within a sentence): documents that share more words come first, and of two that share the
same words, the one that also shares their order (with the stdlib pretraining tokenizer, the
nearest to "sept cent soixante-treize" are "mille sept cent soixante-treize", "trois cent
soixante-treize mille sept cent soixante-douze" and "sept cent soixante-douze"). Ties go to the
lower document index. Plain numpy, in blocks of rows, so memory grows with members x block.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Sentence = Sequence[int]


def _features(doc: Sequence[Sentence], index: dict[tuple[int, ...], int]) -> dict[int, float]:
    counts: dict[int, float] = {}
    for sentence in doc:
        grams = [(t,) for t in sentence] + list(zip(sentence, sentence[1:], strict=False))
        for gram in grams:
            column = index.setdefault(gram, len(index))
            counts[column] = counts.get(column, 0.0) + 1.0
    return counts


def nearest_documents(
    documents: Sequence[Sequence[Sentence]],
    members: Sequence[int],
    k: int,
    block: int = 512,
) -> dict[int, list[int]]:
    """For each member document, the `k` most similar other members, most similar first.

    Args:
      documents: per document its sentences, each a list of token ids.
      members: indices of the documents to compare (others are ignored).
      k: neighbours per member (fewer when there are not k other members).
      block: rows of the similarity matrix computed at a time.

    Returns:
      member -> list of min(k, len(members) - 1) other members.
    """
    if k < 1:
        raise ValueError(f"k={k}: ask for at least one neighbour.")
    members = [int(m) for m in members]
    if len(set(members)) != len(members):
        raise ValueError("members lists a document more than once.")
    index: dict[tuple[int, ...], int] = {}
    rows = [_features(documents[m], index) for m in members]
    dense = np.zeros((len(members), max(1, len(index))), np.float32)
    for r, counts in enumerate(rows):
        dense[r, list(counts)] = list(counts.values())
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    dense /= np.where(norms > 0, norms, 1.0)
    take = min(k, len(members) - 1)
    out: dict[int, list[int]] = {}
    for start in range(0, len(members), block):
        sims = dense[start : start + block] @ dense.T
        sims[np.arange(len(sims)), np.arange(start, start + len(sims))] = -np.inf  # not itself
        # Stable sort of -similarity: equal similarities keep index order.
        order = np.argsort(-sims, axis=1, kind="stable")[:, :take]
        for r, row in enumerate(order):
            out[members[start + r]] = [members[c] for c in row]
    return out
