"""Greedy translation of text in fixed shapes; corpus scores (sacreBLEU, chrF, exact match)."""

from __future__ import annotations

import jax
import numpy as np
import sacrebleu

from transformer_jax.model import Transformer

LENGTH_STEP = 16  # Sources are padded to a multiple of this: a handful of compiled shapes.


def pad_rows(rows: list[list[int]], length: int, batch: int) -> np.ndarray:
    """Right-pad token lists with 0 to `[batch, length]` (missing rows are all pad)."""
    out = np.zeros((batch, length), np.int32)
    for i, ids in enumerate(rows):
        out[i, : len(ids)] = ids
    return out


def _replicated(x: np.ndarray):
    """Identical host data on every process -> one replicated global array (multi-host safe)."""
    if jax.process_count() == 1:
        return x
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("all",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    return jax.make_array_from_process_local_data(sharding, x)


def greedy_translate(
    model: Transformer,
    tokenizer,
    sources: list[str],
    *,
    batch_size: int = 64,
    max_src_len: int | None = None,
) -> list[str]:
    """Greedy KV-cached translation of `sources`, in order.

    Sources are sorted by length and cut into batches of `batch_size` rows padded to a multiple
    of 16 tokens, so a run compiles a few programs at most. Sources longer than `max_src_len`
    (default: the model's `max_len`) are truncated (keeping the final eos).
    """
    from transformer_jax.decoding import greedy_decode

    max_src_len = max_src_len or model.cfg.max_len
    encoded = []
    for text in sources:
        ids = tokenizer.encode(text)[: max_src_len - 1]
        encoded.append(ids + [tokenizer.eos_id])
    order = np.argsort([len(x) for x in encoded], kind="stable")
    outputs: list[str] = [""] * len(sources)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        longest = max(len(encoded[i]) for i in idx)
        length = min(-(-longest // LENGTH_STEP) * LENGTH_STEP, max_src_len)
        src = pad_rows([encoded[i] for i in idx], length, batch_size)
        tokens, _ = greedy_decode(model, _replicated(src))
        tokens = np.asarray(jax.device_get(tokens))
        for row, i in enumerate(idx):
            outputs[i] = tokenizer.decode(tokens[row].tolist())
    return outputs


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
