"""Corpus scores of translations: sacreBLEU, chrF and exact match."""

from __future__ import annotations

import numpy as np
import sacrebleu


def corpus_scores(hypotheses: list[str], references: list[str]) -> dict:
    """sacreBLEU (cased, on detokenized text), chrF and exact match, with BLEU's signature."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references: they must pair up."
        )
    bleu = sacrebleu.metrics.BLEU()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf = sacrebleu.metrics.CHRF()
    chrf_score = chrf.corpus_score(hypotheses, [references])
    exact = float(np.mean([h == r for h, r in zip(hypotheses, references, strict=True)]))
    return {
        "bleu": float(bleu_score.score),
        "chrf": float(chrf_score.score),
        "exact_match": exact if references else 0.0,
        "bleu_signature": str(bleu.get_signature()),
    }
