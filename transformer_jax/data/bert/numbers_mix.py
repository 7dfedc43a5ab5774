"""Bilingual number documents mixed into BERT pretraining: XLM's translation LM on the numbers.

    documents = number_documents(count=2500, seed=0, lang="fr")   # 2,500 documents

Integers of the embedded translation corpus's training split (`data/translation/embedded.py`),
each written in English, then in the target language, one sentence each, `per_document` of them
to a document: ["two hundred and six", "deux cent six", "forty", "quarante", ...]. A document of
one integer makes one pair, `[CLS] English [SEP] French [SEP]` (IsNext) or the English beside
another document's text (NotNext: any document's, or with `data.mix_numbers_negatives="numbers"`
another integer's French, with "similar" one of the most alike); longer documents pack several
translations into a pair. A masked token of one language can then be read from the other. With
the corpus seed of the numbers_pair task (`data.numbers_seed`), no validation or test integer of
that task (side A) is among them: the corpus assigns every integer to one split by a hash of the
integer.
"""

from __future__ import annotations

import os

from transformer_jax.data.translation.embedded import embedded_pairs


def number_documents(
    count: int,
    seed: int,
    lang: str,
    per_document: int = 1,
    cache_dir: str | os.PathLike | None = None,
) -> list[list[str]]:
    """`count` training integers as documents of sentences, English then `lang`, in turn.

    Args:
      count: integers to write.
      seed: the translation corpus's seed (which integers are "train").
      lang: "fr" or "de".
      per_document: integers per document (the last document may hold fewer).
      cache_dir: where the corpus caches its pairs, or None.

    Returns:
      ceil(count / per_document) documents, each a list of 2 sentences per integer.
    """
    if count <= 0:
        return []
    pairs = embedded_pairs("train", count, seed, lang, cache_dir)
    return [
        [sentence for pair in pairs[i : i + per_document] for sentence in pair]
        for i in range(0, len(pairs), per_document)
    ]
