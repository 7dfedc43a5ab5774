"""The "is B the translation of A?" pairs: exact 50/50 labels, near misses one digit away, splits
disjoint by A, words that num2words itself would write, determinism by seed."""

import time

import numpy as np
import pytest
from num2words import num2words

from transformer_jax.data.classify import numbers_pair
from transformer_jax.data.classify.examples import SPLITS
from transformer_jax.data.classify.numbers_pair import (
    NEAR_MISS,
    POSITIVE,
    RANDOM,
    near_misses,
    numbers_pair_dataset,
    pair_integers,
)
from transformer_jax.data.translation.embedded import MAX_VALUE, split_of


def _one_digit_apart(a: int, b: int) -> bool:
    sa, sb = str(a), str(b)
    return len(sa) == len(sb) and sum(x != y for x, y in zip(sa, sb, strict=True)) == 1


def test_near_misses_change_one_digit_and_reach_every_allowed_digit():
    rng = np.random.default_rng(0)
    values = np.array([1, 9, 10, 99, 105, 123456789, 999_999_999, 100_000_000] * 500)
    changed = near_misses(values, rng)
    assert all(_one_digit_apart(a, b) for a, b in zip(values, changed, strict=True))
    assert changed.min() >= 1 and changed.max() < MAX_VALUE  # no leading zero: same length
    # Every position and every other digit is reachable, the leading digit never becomes 0.
    outcomes = set(changed[values == 123456789].tolist())
    assert len(outcomes) == 8 + 8 * 9  # leading: 8 other non-zero digits; 8 others: 9 each
    assert set(changed[values == 9].tolist()) == set(range(1, 9))


@pytest.mark.parametrize("size", [0, 2, 6, 1000])
def test_kinds_are_exactly_half_positive_and_split_between_near_and_random(size):
    a, b, kind = pair_integers("eval", size, seed=5)
    num_pos = size // 2
    num_near = (size - num_pos) // 2
    assert np.bincount(kind, minlength=3).tolist() == [num_pos, num_near, size - num_pos - num_near]
    assert len(set(a.tolist())) == size  # every A distinct
    assert np.all(split_of(a, 5) == SPLITS.index("eval"))
    assert np.all((a == b) == (kind == POSITIVE))
    near = kind == NEAR_MISS
    assert all(_one_digit_apart(x, y) for x, y in zip(a[near], b[near], strict=True))
    random = kind == RANDOM
    assert set(b[random].tolist()) <= set(a.tolist())  # another integer of the same split


def test_examples_are_num2words_of_the_integers_with_labels_from_the_kind():
    data = numbers_pair_dataset({"train": 40, "test": 20}, seed=3, target_lang="de")
    assert data.label_names == ("not_translation", "translation") and data.is_pair
    assert list(data.splits) == ["train", "test"]
    for split, examples in data.splits.items():
        a, b, kind = pair_integers(split, len(examples), seed=3)
        for ex, x, y, k in zip(examples, a, b, kind, strict=True):
            assert ex.text_a == num2words(int(x), lang="en")
            assert ex.text_b == num2words(int(y), lang="de")
            assert ex.label == int(k == POSITIVE)


def test_splits_share_no_side_a_and_are_balanced():
    data = numbers_pair_dataset({"train": 4000, "eval": 400, "test": 400}, seed=0)
    sides = {s: {ex.text_a for ex in data.splits[s]} for s in SPLITS}
    for s in SPLITS:
        assert len(sides[s]) == len(data.splits[s])
        assert sum(ex.label for ex in data.splits[s]) == len(data.splits[s]) // 2
    assert not sides["train"] & sides["eval"]
    assert not sides["train"] & sides["test"]
    assert not sides["eval"] & sides["test"]
    labels = [ex.label for ex in data.splits["train"]]
    assert 0 < labels[:100].count(1) < 100  # shuffled, not positives first


def test_same_seed_same_examples_other_seed_other_examples():
    sizes = {"train": 100, "eval": 20}
    first = numbers_pair_dataset(sizes, seed=11)
    assert first == numbers_pair_dataset(sizes, seed=11)
    other = numbers_pair_dataset(sizes, seed=12)
    assert first.splits["train"] != other.splits["train"]


def test_twenty_thousand_examples_take_seconds_not_minutes():
    start = time.perf_counter()
    data = numbers_pair_dataset({"train": 20_000}, seed=0)
    assert len(data.splits["train"]) == 20_000
    assert time.perf_counter() - start < 10  # about 0.6 s on one core


@pytest.mark.parametrize(
    "sizes, lang, message",
    [
        ({"train": 7}, "fr", "even"),
        ({"train": -2}, "fr", "even"),
        ({"validation": 10}, "fr", "unknown splits"),
        ({"train": 10}, "en", "other than English"),
        ({"train": 10}, "xx", "'fr' or 'de'"),
    ],
)
def test_bad_arguments_are_explained(sizes, lang, message):
    with pytest.raises(ValueError, match=message):
        numbers_pair.numbers_pair_dataset(sizes, seed=0, target_lang=lang)
