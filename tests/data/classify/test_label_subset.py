"""data.train_fraction: a share of the training labels, drawn per label, seeded; the other
splits untouched; a bad fraction named."""

import collections

import pytest

from configs import bert_classify_tiny
from transformer_jax.data.classify.config import validate_classify_data_config
from transformer_jax.data.classify.examples import Example, label_subset
from transformer_jax.data.classify.pipeline import load_dataset


def _examples(counts: dict[int, int]) -> list[Example]:
    return [Example(f"{label}-{i}", None, label) for label, n in counts.items() for i in range(n)]


def test_each_label_keeps_its_share_in_the_original_order():
    examples = _examples({0: 50, 1: 30, 2: 4})
    kept = label_subset(examples, 0.1, seed=0)
    assert collections.Counter(ex.label for ex in kept) == {0: 5, 1: 3, 2: 1}  # at least one
    positions = [examples.index(ex) for ex in kept]
    assert positions == sorted(positions)


def test_same_seed_same_subset_other_seed_another():
    examples = _examples({0: 100, 1: 100})
    assert label_subset(examples, 0.2, 3) == label_subset(examples, 0.2, 3)
    assert label_subset(examples, 0.2, 3) != label_subset(examples, 0.2, 4)
    assert label_subset(examples, 1.0, 0) == examples


def test_the_configured_fraction_cuts_only_the_training_split():
    cfg = bert_classify_tiny.get_config().data
    full = load_dataset(cfg)
    cfg.train_fraction = 0.1
    part = load_dataset(cfg)
    counts = collections.Counter(ex.label for ex in full.splits["train"])
    assert len(part.splits["train"]) == sum(round(0.1 * n) for n in counts.values()) == 52
    assert set(part.splits["train"]) <= set(full.splits["train"])
    assert part.splits["eval"] == full.splits["eval"] and part.splits["test"] == full.splits["test"]


@pytest.mark.parametrize("fraction", [0.0, 1.5, -0.1])
def test_a_fraction_outside_zero_to_one_is_named(fraction):
    cfg = bert_classify_tiny.get_config().data
    cfg.train_fraction = fraction
    with pytest.raises(ValueError, match=r"'train_fraction': got .* Use a number in \(0, 1\]"):
        validate_classify_data_config(cfg)
