"""Sentence pairs "is B the translation of A?", from the embedded English / French number corpus.

A is an integer n written in English; B is written in the target language by `num2words`:
- half the examples are translations (B says n);
- a quarter are near misses: B says n', which differs from n in exactly one decimal digit (same
  number of digits, no leading zero), so word order and agreement must be read, not guessed;
- a quarter are random: B says another integer of the same split.
(When a split's size / 2 is odd, the random negatives get the one example left over.)

The integers on side A come from `embedded.sample_integers`, so the split of an example is
decided by a hash of n, exactly as in the translation corpus with the same seed: the splits
share no A, and no A of eval or test is in the translation corpus's training split either.
Every example is a function of (split, size, seed, target_lang) alone.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from num2words import CONVERTER_CLASSES

from transformer_jax.data.classify.examples import SPLITS, Example, LabelledSplits
from transformer_jax.data.translation.embedded import MAX_VALUE, _converter, sample_integers

LABEL_NAMES = ("not_translation", "translation")
# What B is, per example (returned by `pair_integers`, for tests and error analysis).
POSITIVE, NEAR_MISS, RANDOM = 0, 1, 2
_STREAM = 0x6E756D  # Separates this task's random stream from sample_integers' ([seed, split]).


def near_misses(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Changes one random decimal digit of each integer to another digit.

    The digit position is uniform over the integer's digits and the new digit uniform over the
    allowed ones (1-9 for the leading digit, 0-9 elsewhere, never the old digit), so the result
    has the same number of digits, no leading zero, and differs from the input.

    Args:
      values: int64 array [N] of integers in [1, MAX_VALUE).
      rng: the random generator.

    Returns:
      int64 array [N] of integers in [1, MAX_VALUE), each one digit away from its input.
    """
    values = np.asarray(values, np.int64)
    digits = np.char.str_len(values.astype(str))
    position = (rng.random(values.shape) * digits).astype(np.int64)  # 0 = the leading digit.
    place = 10 ** (digits - 1 - position)
    old = (values // place) % 10
    lowest = (position == 0).astype(np.int64)  # No leading zero.
    # Uniform over the 10 - lowest allowed digits minus the old one: draw among 9 - lowest
    # and step over the old digit.
    new = lowest + (rng.random(values.shape) * (9 - lowest)).astype(np.int64)
    new = new + (new >= old)
    return values + (new - old) * place


def pair_integers(split: str, size: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The integers behind one split's examples, in the examples' order.

    Args:
      split: "train", "eval" or "test".
      size: number of examples; even, so that exactly half are translations.
      seed: corpus seed (the same seed gives the same integers in the same order).

    Returns:
      (a, b, kind): int64 arrays [size]; `a` distinct integers of `split` (side A), `b` the
      integer side B says, `kind` POSITIVE (b == a), NEAR_MISS or RANDOM.
    """
    # One spare integer: MAX_VALUE (10 digits, all other 10-digit integers exceed it) has no
    # near miss, so it is dropped if drawn.
    values = sample_integers(split, size + 1, seed)
    a = values[values < MAX_VALUE][:size]
    num_pos = size // 2
    num_near = (size - num_pos) // 2
    kind = np.full(size, RANDOM, np.int64)
    kind[:num_pos], kind[num_pos : num_pos + num_near] = POSITIVE, NEAR_MISS
    rng = np.random.default_rng([seed, SPLITS.index(split), _STREAM])
    b = a.copy()
    near = kind == NEAR_MISS
    b[near] = near_misses(a[near], rng)
    # Another example's A: an offset in [1, size) never lands on the example itself, and A's
    # are distinct, so b != a.
    (random,) = np.nonzero(kind == RANDOM)
    if size > 1:
        b[random] = a[(random + rng.integers(1, size, len(random))) % size]
    order = rng.permutation(size)
    return a[order], b[order], kind[order]


def _check(sizes: Mapping[str, int], target_lang: str) -> None:
    unknown = sorted(set(sizes) - set(SPLITS))
    if unknown:
        raise ValueError(f"numbers_pair_dataset: unknown splits {unknown}; use keys of {SPLITS}.")
    for split, size in sizes.items():
        if not isinstance(size, int | np.integer) or size < 0 or size % 2:
            raise ValueError(
                f"numbers_pair_dataset: sizes[{split!r}] = {size!r}; it must be an even "
                f"integer >= 0 so that exactly half of the examples are translations."
            )
    if target_lang == "en" or target_lang not in CONVERTER_CLASSES:
        raise ValueError(
            f"numbers_pair_dataset: target_lang={target_lang!r} is not a num2words language "
            f"other than English; use 'fr' or 'de' (any of {sorted(CONVERTER_CLASSES)})."
        )


def numbers_pair_dataset(
    sizes: Mapping[str, int], seed: int, target_lang: str = "fr"
) -> LabelledSplits:
    """Builds the "is B the translation of A?" pairs of each requested split.

    Args:
      sizes: split name -> number of examples (even); splits left out are not built.
      seed: corpus seed; the same seed gives the same examples in the same order.
      target_lang: language of side B, "fr" or "de".

    Returns:
      LabelledSplits with label_names ("not_translation", "translation"); each split has
      exactly size / 2 examples labelled "translation", in a seeded random order.

    Raises:
      ValueError: an unknown split, an odd or negative size, or an unsupported language.
    """
    _check(sizes, target_lang)
    english, target = _converter("en"), _converter(target_lang)
    splits = {}
    for split in SPLITS:
        if split not in sizes:
            continue
        a, b, kind = pair_integers(split, int(sizes[split]), seed)
        splits[split] = [
            Example(english.to_cardinal(int(x)), target.to_cardinal(int(y)), int(k == POSITIVE))
            for x, y, k in zip(a, b, kind, strict=True)
        ]
    return LabelledSplits(LABEL_NAMES, splits)
