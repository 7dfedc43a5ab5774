"""Texts to BERT inputs, for fine-tuning batches and for inference alike.

`[CLS] A [SEP]` for one text, `[CLS] A [SEP] B [SEP]` for a pair, segment ids 0 for the first
part and 1 for B's. Too long an input is cut from the end of the longer text, one token at a
time, as BERT does (deterministically here: the start of a text carries most of its meaning).
`[CLS]`, `[SEP]` and `[MASK]` written in a text become `[UNK]`, except that `encode_masked`
turns each literal `[MASK]` into the mask token. `layout` pads with `PAD_ID`; `real_tokens`
gives the model's `attention_mask` of laid-out rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from transformer_jax.tokens import CLS_ID, MASK_ID, PAD_ID, SEP_ID, UNK_ID

MASK_TEXT = "[MASK]"


@dataclasses.dataclass(frozen=True)
class Specials:
    """The ids of BERT's special tokens in one tokenizer: the project's fixed ones by default,
    a converted checkpoint's own (e.g. bert-base's 101, 102, 103) from `specials_of`.
    Padding is always `PAD_ID` (0), as in every BERT vocabulary (`[PAD]`)."""

    cls: int = CLS_ID
    sep: int = SEP_ID
    mask: int = MASK_ID
    unk: int = UNK_ID

    @property
    def inputs(self) -> tuple[int, int, int]:
        """The ids a text may not spell out (they become `unk`)."""
        return (self.cls, self.sep, self.mask)


PROJECT = Specials()  # The fixed ids of the project's tokenizers (transformer_jax.tokens).


def specials_of(tokenizer) -> Specials:
    """The tokenizer's BERT ids: its own where it names them (`cls_id`, `sep_id`, `mask_id`,
    `unk_id`: a converted checkpoint's tokenizer), else the project's fixed ones.

    Raises:
      ValueError: a converted tokenizer without [CLS]/[SEP]/[MASK], or whose [PAD] is not 0.
    """
    if getattr(tokenizer, "cls_id", None) is None:
        return PROJECT
    ids = {role: getattr(tokenizer, f"{role}_id", None) for role in ("sep", "mask", "pad")}
    missing = [role for role in ("sep", "mask") if ids[role] is None]
    if missing or ids["pad"] != PAD_ID:
        raise ValueError(
            f"the tokenizer has no {missing} token or its pad id is {ids['pad']}, not "
            f"{PAD_ID}: BERT inputs need [CLS], [SEP], [MASK] and [PAD] = {PAD_ID}."
        )
    return Specials(tokenizer.cls_id, ids["sep"], ids["mask"], tokenizer.unk_id)


def encode_plain(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Ids of each text, any special id the text spells out made `UNK`."""
    specials = specials_of(tokenizer)
    out = []
    for ids in tokenizer.encode_batch(list(texts)):
        array = np.asarray(ids, np.int64)
        out.append(np.where(np.isin(array, specials.inputs), specials.unk, array).tolist())
    return out


def encode_masked(tokenizer, text: str) -> list[int]:
    """Ids of a text in which each literal `[MASK]` is the mask token.

    The pieces between masks are encoded apart, so the word after a mask starts a word, as it
    did in pretraining (SentencePiece would otherwise leave a lone "▁" before the mask).
    """
    parts = text.split(MASK_TEXT)
    # Spaces before a mask belong to the masked word ("▁word"), not to a piece of their own.
    parts = encode_plain(tokenizer, [p.rstrip(" ") for p in parts[:-1]] + parts[-1:])
    mask = specials_of(tokenizer).mask
    ids = list(parts[0])
    for part in parts[1:]:
        ids += [mask, *part]
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
    a: Sequence[int], b: Sequence[int] | None, max_len: int, specials: Specials = PROJECT
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(tokens int32 [max_len], segment ids int32 [max_len], truncated?) of one input, with
    the [CLS] and [SEP] of `specials` (`specials_of(tokenizer)`).

    Raises:
      ValueError: max_len leaves no room for a token of each text.
    """
    count = 2 if b is None else 3
    if max_len < count + (1 if b is None else 2):
        raise ValueError(f"max_len={max_len} leaves no room for the text(s) and {count} specials.")
    a, b = list(a), None if b is None else list(b)
    truncated = truncate_pair(a, b, max_len - count)
    tokens = [specials.cls, *a, specials.sep] + ([] if b is None else [*b, specials.sep])
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
