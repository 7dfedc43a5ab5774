"""The embedded digits: an exact, seeded, stratified and disjoint split of 8x8 images in [0, 1]."""

import numpy as np
import pytest

from transformer_jax.data.images.digits import (
    digits_dataset,
    digits_split_indices,
    proportional_counts,
)


@pytest.fixture(scope="module")
def dataset():
    return digits_dataset(seed=0, eval_size=180, test_size=360)


def test_sizes_shapes_and_range(dataset):
    sizes = {name: len(split) for name, split in dataset.splits.items()}
    assert sizes == {"train": 1257, "eval": 180, "test": 360}
    assert dataset.image_shape == (8, 8, 1)
    assert dataset.num_classes == 10
    assert dataset.label_names == tuple("0123456789")
    for split in dataset.splits.values():
        assert split.images.dtype == np.float32 and split.labels.dtype == np.int32
        assert split.images.min() == 0.0 and split.images.max() == 1.0  # 0..16 / 16


def test_split_is_disjoint_complete_and_stratified():
    labels = np.repeat(np.arange(5), [30, 31, 40, 17, 50])  # 168, uneven classes
    parts = digits_split_indices(labels, seed=3, eval_size=23, test_size=41)
    assert [len(parts[s]) for s in ("eval", "test")] == [23, 41]
    joined = np.concatenate(list(parts.values()))
    assert np.array_equal(np.sort(joined), np.arange(len(labels)))  # disjoint and complete
    class_sizes = np.bincount(labels)
    for name, size in [("eval", 23), ("test", 41), ("train", 104)]:
        counts = np.bincount(labels[parts[name]], minlength=5)
        exact = size * class_sizes / len(labels)
        assert np.all(np.abs(counts - exact) <= 1), (name, counts, exact)
        assert np.all(counts > 0)


def test_split_depends_on_the_seed_only():
    labels = np.arange(300) % 7
    a = digits_split_indices(labels, seed=1, eval_size=30, test_size=40)
    b = digits_split_indices(labels, seed=1, eval_size=30, test_size=40)
    c = digits_split_indices(labels, seed=2, eval_size=30, test_size=40)
    assert all(np.array_equal(a[s], b[s]) for s in a)
    assert not np.array_equal(a["eval"], c["eval"])
    assert not np.array_equal(a["test"], c["test"])


def test_digits_dataset_split_is_the_pure_function(dataset):
    other = digits_dataset(seed=1, eval_size=180, test_size=360)
    assert not np.array_equal(other.splits["eval"].images, dataset.splits["eval"].images)
    again = digits_dataset(seed=0, eval_size=180, test_size=360)
    for name in dataset.splits:
        assert np.array_equal(again.splits[name].images, dataset.splits[name].images)
        assert np.array_equal(again.splits[name].labels, dataset.splits[name].labels)


def test_proportional_counts_rounding():
    counts = proportional_counts(np.array([1, 1, 1]), 2)
    assert counts.tolist() == [1, 1, 0]  # ties go to the lower class
    assert proportional_counts(np.array([10, 30]), 8).tolist() == [2, 6]


def test_holding_out_a_whole_class_is_an_error():
    labels = np.array([0] * 4 + [1] * 4)
    with pytest.raises(ValueError, match=r"leave class 0 \(4 images\) no training images"):
        digits_split_indices(labels, seed=0, eval_size=4, test_size=4)
