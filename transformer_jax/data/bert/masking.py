"""Masked-LM corruption as in BERT (Devlin et al. 2019, §3.1 and Appendix A.1), in numpy.

Of each row's maskable tokens (not padding, not `[CLS]` / `[SEP]` or any id below
`first_regular_id`), `rate` (15%) are selected, at least one when the row has any: of those,
80% are replaced by `[MASK]`, 10% by a random ordinary token, 10% left unchanged. The loss is
over the selected positions only (`weights`), whatever they were replaced by. The draws come
from the `np.random.Generator` passed in: seeded from (data seed, epoch, batch), the same batch
is masked the same way after a restart.

With `word_starts` (whole word masking, the variant Google released with BERT in 2019) the unit
of selection is a word: a piece that begins one (SentencePiece's `▁`) and the pieces after it
up to the next word start or special. Words are taken in random order, each whole, skipping any
that would overshoot the row's `rate` share, so every piece of a chosen word must be predicted
from the rest of the row (in a translation pair: from the other language), not spelled out from
its neighbours; each chosen piece then gets its own 80/10/10 draw.

Letters: B rows, T length.
"""

from __future__ import annotations

import numpy as np

from transformer_jax.tokens import FIRST_REGULAR_ID, MASK_ID


def mask_tokens(
    tokens: np.ndarray,
    rng: np.random.Generator,
    *,
    vocab_size: int,
    rate: float = 0.15,
    mask_id: int = MASK_ID,
    first_regular_id: int = FIRST_REGULAR_ID,
    word_starts: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Corrupts `tokens` [B, T] for the masked LM.

    Args:
      tokens: int [B, T]; ids below `first_regular_id` (padding, specials) are never selected.
      rng: the source of every draw.
      vocab_size: random replacements are drawn from [first_regular_id, vocab_size).
      rate: share of each row's maskable tokens selected (rounded; at least one).
      mask_id: the `[MASK]` id.
      first_regular_id: the first id of an ordinary piece.
      word_starts: bool [vocab_size], True for the pieces that begin a word; None selects
        pieces one by one (BERT's original masking; the same draws as before this option).

    Returns:
      (inputs [B, T] with the replacements, targets [B, T] = the original tokens, weights
      [B, T] float32: 1.0 at the selected positions, else 0).
    """
    if not 0.0 < rate < 1.0:
        raise ValueError(f"mask rate must be in (0, 1), got {rate}.")
    if vocab_size <= first_regular_id:
        raise ValueError(f"vocab_size={vocab_size} has no ordinary ids (from {first_regular_id}).")
    tokens = np.asarray(tokens)
    maskable = tokens >= first_regular_id
    counts = maskable.sum(axis=1)
    wanted = np.where(counts > 0, np.maximum(1, np.rint(rate * counts)), 0).astype(np.int64)
    if word_starts is None:
        # Rank the maskable positions of each row in random order; select the first `wanted`.
        keys = np.where(maskable, rng.random(tokens.shape), np.inf)
        ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
        selected = maskable & (ranks < wanted[:, None])
    else:
        selected = _select_words(tokens, maskable, wanted, word_starts, rng)
    action = rng.random(tokens.shape)
    random_ids = rng.integers(first_regular_id, vocab_size, tokens.shape)
    inputs = np.where(selected & (action < 0.8), mask_id, tokens)
    inputs = np.where(selected & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    return inputs.astype(tokens.dtype), tokens.copy(), selected.astype(np.float32)


def _select_words(
    tokens: np.ndarray,
    maskable: np.ndarray,
    wanted: np.ndarray,
    word_starts: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """bool [B, T]: whole words, in random order, up to `wanted` [B] pieces a row (at least one
    word: the shortest, when none fits)."""
    word_starts = np.asarray(word_starts, bool)
    starts = word_starts[np.clip(tokens, 0, len(word_starts) - 1)] & maskable
    starts[:, 1:] |= maskable[:, 1:] & ~maskable[:, :-1]  # a special or padding ends a word
    starts[:, 0] |= maskable[:, 0]
    words = np.where(maskable, np.cumsum(starts, axis=1) - 1, -1)  # word index, -1: not maskable
    selected = np.zeros(tokens.shape, bool)
    for row in range(tokens.shape[0]):
        count = int(words[row].max(initial=-1)) + 1
        if not count:
            continue
        lengths = np.bincount(words[row][words[row] >= 0], minlength=count)
        chosen, taken = [], 0
        for w in np.argsort(rng.random(count), kind="stable"):
            if taken + lengths[w] <= wanted[row]:
                chosen.append(w)
                taken += lengths[w]
                if taken == wanted[row]:
                    break
        if not chosen:
            chosen = [int(np.argmin(lengths))]
        selected[row] = np.isin(words[row], chosen)
    return selected


def gather_selected(
    targets: np.ndarray, weights: np.ndarray, max_predictions: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The selected positions of each row, left-aligned in `max_predictions` slots.

    The masked-LM head then runs on `[B, P]` positions instead of all `[B, T]` (BERT's
    `masked_lm_positions`): about 7x less output-layer work at 15%.

    Args:
      targets: int [B, T] original tokens; weights: [B, T], nonzero where selected.
      max_predictions: P, at least the most selections of any row.

    Returns:
      (positions int32 [B, P] (0 in unused slots), targets int32 [B, P], weights float32 [B, P]).
    """
    selected = np.asarray(weights) > 0
    most = int(selected.sum(axis=1).max(initial=0))
    if most > max_predictions:
        raise ValueError(
            f"a row has {most} selected positions, over max_predictions={max_predictions}."
        )
    # A stable sort puts each row's selected positions first, in order.
    order = np.argsort(~selected, axis=1, kind="stable")[:, :max_predictions]
    used = np.take_along_axis(selected, order, axis=1)
    positions = np.where(used, order, 0).astype(np.int32)
    picked = np.where(used, np.take_along_axis(np.asarray(targets), order, axis=1), 0)
    return positions, picked.astype(np.int32), used.astype(np.float32)
