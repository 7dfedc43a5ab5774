"""The embedded corpus: English number phrases translated into French or German, made on the spot.

"three hundred and eighty-four thousand, two hundred and twenty-one" ->
"trois cent quatre-vingt-quatre mille deux cent vingt et un". Both sides are written by
`num2words`, so every answer can be checked exactly, and the task is a real translation problem:
word order, agreement ("quatre-vingts" but "quatre-vingt-un") and compounding (German) differ.

Integers are drawn log-uniformly from [1, 10^9]. Which split an integer belongs to is decided by a
seeded hash of the integer itself, so train / eval / test are disjoint by integer and each split
does not depend on the other splits' sizes.
"""

from __future__ import annotations

import collections
import importlib.metadata
import os

import numpy as np
from num2words import CONVERTER_CLASSES

from transformer_jax import storage

MAX_VALUE = 10**9
_SPLIT_CODES = {"train": 0, "eval": 1, "test": 2}
_HELD_OUT_FRACTION = 1 / 20  # Of all integers, 1/20 belong to eval and 1/20 to test.
_FORMAT_VERSION = 1  # Bump when the generation below changes (invalidates cached files).


def _converter(lang: str):
    """Returns a num2words converter for `lang` that writes the same words, faster.

    num2words' `splitnum` scans every card up to 10^600 for each number; dropping the cards above
    MAX_VALUE cannot change the words for integers up to MAX_VALUE (cards above the value are
    skipped anyway) and makes conversion several times faster (tests compare with `num2words`).
    """
    converter = type(CONVERTER_CLASSES[lang])()
    converter.cards = collections.OrderedDict(
        (value, word) for value, word in converter.cards.items() if value <= MAX_VALUE
    )
    return converter


def _split_hash(values: np.ndarray, seed: int) -> np.ndarray:
    """Returns a uniform number in [0, 1) per integer (splitmix64 of the integer and the seed)."""
    offset = np.uint64((seed * 0x9E3779B97F4A7C15 + 1) % 2**64)  # Python ints: no overflow.
    x = values.astype(np.uint64) + offset  # uint64 arrays wrap around silently, as intended.
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def split_of(values: np.ndarray, seed: int) -> np.ndarray:
    """Returns the split code of each integer: 0 train, 1 eval, 2 test.

    Args:
      values: int array of integers in [1, MAX_VALUE].
      seed: the corpus seed.

    Returns:
      An int array of the same shape.
    """
    u = _split_hash(np.asarray(values), seed)
    return np.where(u < _HELD_OUT_FRACTION, 2, np.where(u < 2 * _HELD_OUT_FRACTION, 1, 0))


def sample_integers(split: str, size: int, seed: int) -> np.ndarray:
    """Draws `size` distinct integers of one split, log-uniform over [1, MAX_VALUE].

    Args:
      split: "train", "eval" or "test".
      size: how many integers.
      seed: the corpus seed; the same seed gives the same integers in the same order.

    Returns:
      int64 array [size] of distinct integers, all of which `split_of` assigns to `split`.
    """
    code = _SPLIT_CODES[split]
    rng = np.random.default_rng([seed, code])
    chosen = np.zeros(0, np.int64)
    while len(chosen) < size:
        draws = np.exp(rng.uniform(0.0, np.log(MAX_VALUE + 1.0), 2 * size + 1000))
        draws = np.clip(draws.astype(np.int64), 1, MAX_VALUE)
        draws = np.concatenate([chosen, draws[split_of(draws, seed) == code]])
        _, first = np.unique(draws, return_index=True)
        chosen = draws[np.sort(first)]  # Distinct, in order of first appearance.
    return chosen[:size]


def number_pairs(values: np.ndarray, target_lang: str) -> list[tuple[str, str]]:
    """Writes each integer in English and in the target language.

    Args:
      values: int array [N] of integers in [1, MAX_VALUE].
      target_lang: "fr" or "de".

    Returns:
      N (english, translation) pairs.
    """
    english, target = _converter("en"), _converter(target_lang)
    return [(english.to_cardinal(int(v)), target.to_cardinal(int(v))) for v in values]


def embedded_pairs(
    split: str, size: int, seed: int, target_lang: str, cache_dir: str | os.PathLike | None = None
) -> list[tuple[str, str]]:
    """Returns the pairs of one split of the embedded corpus, from a cache file when there is one.

    Generating the training split takes seconds, so with `cache_dir` the pairs are written
    to a TSV file there once and read back afterwards.

    Args:
      split: "train", "eval" or "test".
      size: number of pairs.
      seed: corpus seed.
      target_lang: "fr" or "de".
      cache_dir: directory for the cache file, or None to always generate.

    Returns:
      `size` (english, translation) pairs.
    """
    if split not in _SPLIT_CODES:
        raise ValueError(
            f"embedded corpus: unknown split {split!r}; use one of {tuple(_SPLIT_CODES)}."
        )
    if cache_dir is None:
        return number_pairs(sample_integers(split, size, seed), target_lang)
    path = (
        storage.as_path(cache_dir) / f"{embedded_fingerprint(split, size, seed, target_lang)}.tsv"
    )
    if path.exists():
        lines = path.read_text(encoding="utf-8").split("\n")[:-1]
        return [tuple(line.split("\t")) for line in lines]
    pairs = number_pairs(sample_integers(split, size, seed), target_lang)
    # Atomic: concurrent writers (several hosts) cannot leave half a file.
    storage.write_text_atomic(path, "".join(f"{s}\t{t}\n" for s, t in pairs))
    return pairs


def embedded_fingerprint(split: str, size: int, seed: int, target_lang: str) -> str:
    """Names one split of the embedded corpus (used for cache file names)."""
    version = importlib.metadata.version("num2words")
    return (
        f"embedded-en-{target_lang}-{split}-n{size}-seed{seed}"
        f"-num2words{version}-v{_FORMAT_VERSION}"
    )
