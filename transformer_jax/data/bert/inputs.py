"""Texts to BERT inputs, for fine-tuning batches and for inference alike.

`[CLS] A [SEP]` for one text, `[CLS] A [SEP] B [SEP]` for a pair, segment ids 0 for the first
part and 1 for B's. Too long an input is cut from the end of the longer text, one token at a
time, as BERT does (deterministically here: the start of a text carries most of its meaning).
`[CLS]`, `[SEP]` and `[MASK]` written in a text become `[UNK]`, except that `encode_masked`
turns each literal `[MASK]` into the mask token. `layout` pads with `PAD_ID`; `real_tokens`
gives the model's `attention_mask` of laid-out rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from transformer_jax.data.tokenizer import Tokenizer
from transformer_jax.tokens import CLS_ID, MASK_ID, PAD_ID, SEP_ID, UNK_ID

MASK_TEXT = "[MASK]"
_SPECIAL = np.array([CLS_ID, SEP_ID, MASK_ID])


def encode_plain(tokenizer: Tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Ids of each text, any special id the text spells out made `UNK`."""
    out = []
    for ids in tokenizer.encode_batch(list(texts)):
        array = np.asarray(ids, np.int64)
        out.append(np.where(np.isin(array, _SPECIAL), UNK_ID, array).tolist())
    return out


def encode_masked(tokenizer: Tokenizer, text: str) -> list[int]:
    """Ids of a text in which each literal `[MASK]` is the mask token.

    The pieces between masks are encoded apart, so the word after a mask starts a word, as it
    did in pretraining (SentencePiece would otherwise leave a lone "▁" before the mask).
    """
    parts = text.split(MASK_TEXT)
    # Spaces before a mask belong to the masked word ("▁word"), not to a piece of their own.
    parts = encode_plain(tokenizer, [p.rstrip(" ") for p in parts[:-1]] + parts[-1:])
    ids = list(parts[0])
    for part in parts[1:]:
        ids += [MASK_ID, *part]
    return ids


def truncate_pair(a: list[int], b: list[int] | None, budget: int) -> bool:
    """Cuts the longer of a and b (from its end) until both fit `budget`; True if it cut."""
    cut = False
    while len(a) + len(b or ()) > budget:
        longer = b if b is not None and len(b) > len(a) else a
        longer.pop()
        cut = True
    return cut


def layout(
    a: Sequence[int], b: Sequence[int] | None, max_len: int
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(tokens int32 [max_len], segment ids int32 [max_len], truncated?) of one input.

    Raises:
      ValueError: max_len leaves no room for a token of each text.
    """
    specials = 2 if b is None else 3
    if max_len < specials + (1 if b is None else 2):
        raise ValueError(
            f"max_len={max_len} leaves no room for the text(s) and {specials} specials."
        )
    a, b = list(a), None if b is None else list(b)
    truncated = truncate_pair(a, b, max_len - specials)
    tokens = [CLS_ID, *a, SEP_ID] + ([] if b is None else [*b, SEP_ID])
    segments = [0] * (len(a) + 2) + ([] if b is None else [1] * (len(b) + 1))
    out = np.full((2, max_len), PAD_ID, np.int32)
    out[0, : len(tokens)], out[1, : len(tokens)] = tokens, segments
    return out[0], out[1], truncated


def real_tokens(tokens):
    """True at the tokens `layout` wrote, False at its padding: the encoder's `attention_mask`.

    Shapes: int `[..., T]` in, bool `[..., T]` out; numpy or jax arrays alike (unannotated:
    the data package does not import jax).

    `layout` pads with `PAD_ID`, a piece of its own that no text encodes to (SentencePiece's
    `<pad>` control piece), so in rows laid out here, and only in them, the id marks padding.
    """
    return tokens != PAD_ID
