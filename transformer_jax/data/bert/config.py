"""BERT pretraining input's configuration: the language-model sources plus pairs and masking.

Documents come from the same sources as the GPT model's (`data/lm/config.py`: the embedded
stdlib documentation, own text, TFDS), are cut into sentences, paired for next-sentence
prediction and masked for the masked LM. The tokenizer is SentencePiece with `[CLS] [SEP]
[MASK]` as user-defined pieces (ids 4, 5, 6): bytes cannot hold them.
"""

from __future__ import annotations

import math

import ml_collections

from transformer_jax.data.config_checks import check_choice, check_fraction, check_int, fail
from transformer_jax.data.lm import config as lm_config
from transformer_jax.data.translation.config import EMBEDDED_LANGS

MIX_NEGATIVES = ("any", "numbers", "similar")


def default_bert_data_config() -> ml_collections.ConfigDict:
    """The language-model data fields (stdlib documentation by default) plus BERT's."""
    c = lm_config.default_lm_data_config()
    c.max_len = 128  # Tokens per row, [CLS] and both [SEP] included (BERT: 128, then 512).
    c.tokens_per_batch = 4096  # Global tokens per step (rows = tokens_per_batch / max_len).
    c.mask_rate = 0.15  # Share of each row's ordinary tokens selected for the masked LM.
    c.short_seq_prob = 0.1  # Share of pairs given a shorter random length (BERT: 0.1).
    # Mask whole words in training rows (all pieces of a word from `▁` to the next word), as
    # Google's 2019 BERT release did; False: pieces one by one. Validation and test masks stay
    # per piece, so masked-LM accuracy compares across runs.
    c.whole_word_mask = False
    c.eval_seed = 1  # Seed of the fixed validation/test pairs and masks.
    # Training documents added to the source's: this many integers of the embedded English /
    # French number corpus's training split, each written in English then in French, one
    # sentence each (data/bert/numbers_mix.py). 0 = none. The eval/test splits stay the
    # source's, and so does the tokenizer unless `mix_numbers_in_tokenizer`.
    c.mix_numbers = 0
    # Train the new tokenizer on the number documents too, so that number words of both
    # languages become pieces of their own (`quatre`, `soixante`) rather than 1-3 letters each.
    c.mix_numbers_in_tokenizer = False
    c.mix_numbers_seed = 0  # The corpus seed: numbers_pair's numbers_seed keeps its tests out.
    c.mix_numbers_lang = "fr"  # The second language: "fr" or "de".
    c.mix_numbers_per_document = 1  # Integers per document (1: one pair each, English | French).
    # A NotNext B for a number document: "any" (BERT's: any other document, from a random
    # sentence) or "numbers" (another number document, from the sentence where the true next
    # text would start: with one integer a document, another integer's French) or "similar"
    # (as "numbers", from one of its `mix_numbers_neighbours` nearest number documents by
    # shared tokens and token pairs: French that shares most of its words, data/bert/neighbours.py).
    c.mix_numbers_negatives = "any"
    c.mix_numbers_neighbours = 8
    return c


def validate_bert_data_config(cfg: ml_collections.ConfigDict) -> None:
    """Checks every field the BERT input reads; raises naming the first bad one."""
    for field in ("mask_rate", "short_seq_prob", "eval_seed", "mix_numbers"):
        if field not in cfg:
            raise fail(field, "missing", "Start from default_bert_data_config().")
    lm_config.validate_lm_data_config(cfg)
    if cfg.tokenizer != "sentencepiece":
        raise fail(
            "tokenizer",
            f"got {cfg.tokenizer!r}; BERT needs [CLS] [SEP] [MASK] pieces",
            "Use 'sentencepiece'.",
        )
    check_int(cfg, "max_len", 8)  # [CLS] A [SEP] B [SEP] with a few tokens each
    check_fraction(cfg, "mask_rate")
    check_fraction(cfg, "short_seq_prob", open_low=False)
    check_int(cfg, "eval_seed", 0)
    check_int(cfg, "mix_numbers", 0)
    check_int(cfg, "mix_numbers_seed", 0)
    check_int(cfg, "mix_numbers_per_document", 1)
    check_choice(cfg, "mix_numbers_lang", EMBEDDED_LANGS)
    check_choice(cfg, "mix_numbers_negatives", MIX_NEGATIVES)
    check_int(cfg, "mix_numbers_neighbours", 1)
    if cfg.get("mix_numbers_in_tokenizer", False):
        if not cfg.mix_numbers:
            raise fail(
                "mix_numbers_in_tokenizer",
                "True with mix_numbers=0: there are no number documents to train it on",
                "Set data.mix_numbers, or leave mix_numbers_in_tokenizer False.",
            )
        if cfg.spm_model_path is not None:
            raise fail(
                "mix_numbers_in_tokenizer",
                f"True, but data.spm_model_path={cfg.spm_model_path!r} is a trained tokenizer",
                "Unset spm_model_path to train one on the number documents too, or leave "
                "mix_numbers_in_tokenizer False.",
            )


def max_predictions(cfg: ml_collections.ConfigDict) -> int:
    """Masked positions a row can hold: mask_rate of its ordinary tokens, rounded up."""
    return max(1, math.ceil(cfg.mask_rate * (cfg.max_len - 3)) + 1)
