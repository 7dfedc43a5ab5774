"""Image batches: seeded shuffle and augmentation, exact resumption, host shards, eval coverage."""

import itertools

import numpy as np
import pytest

from transformer_jax.data.images.config import default_image_data_config
from transformer_jax.data.images.examples import ImageSplit
from transformer_jax.data.images.pipeline import (
    ImageTrainIterator,
    image_eval_batches,
    load_image_dataset,
)

N, H, W, C = 37, 5, 6, 3


def config(**overrides):
    cfg = default_image_data_config()
    cfg.batch_size, cfg.eval_batch_size = 8, 8
    for key, value in overrides.items():
        cfg[key] = value
    return cfg


@pytest.fixture(scope="module")
def split():
    """37 random images; label i for image i, so every row says which image it came from."""
    images = np.random.default_rng(0).random((N, H, W, C), dtype=np.float32)
    return ImageSplit(images, np.arange(N, dtype=np.int32))


def take(iterator, n):
    return [next(iterator) for _ in range(n)]


def assert_same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])


def shifts(image, s):
    """Every translation of [H, W, C] `image` by offsets in [-s, s]^2, zero-filled."""
    padded = np.pad(image, ((s, s), (s, s), (0, 0)))
    return [
        padded[s - dy : s - dy + H, s - dx : s - dx + W]
        for dy, dx in itertools.product(range(-s, s + 1), repeat=2)
    ]


def test_batch_format_and_determinism(split):
    cfg = config()
    batches = take(ImageTrainIterator(split, cfg, process_index=0, process_count=1), 6)
    again = take(ImageTrainIterator(split, cfg, process_index=0, process_count=1), 6)
    assert_same_batches(batches, again)
    batch = batches[0]
    assert batch["images"].shape == (8, H, W, C) and batch["images"].dtype == np.float32
    assert batch["labels"].shape == (8,) and batch["labels"].dtype == np.int32
    assert batch["weights"].dtype == np.float32 and np.all(batch["weights"] == 1.0)
    # 37 images make 4 full batches per epoch (5 images dropped), each image at most once.
    epoch0 = np.concatenate([b["labels"] for b in batches[:4]])
    assert len(set(epoch0)) == 32
    other = take(ImageTrainIterator(split, config(shuffle_seed=1), process_count=1), 1)
    assert not np.array_equal(other[0]["labels"], batch["labels"])


def test_resumes_exactly_mid_epoch(split):
    cfg = config()
    first = ImageTrainIterator(split, cfg, process_index=0, process_count=1)
    take(first, 3)
    state = first.get_state()
    assert state["epoch"] == 0 and state["batch_in_epoch"] == 3
    expected = take(first, 5)  # crosses into epoch 1
    resumed = ImageTrainIterator(split, cfg, process_index=0, process_count=1)
    resumed.set_state(state)
    assert_same_batches(take(resumed, 5), expected)
    other = ImageTrainIterator(split, config(random_shift=2), process_index=0, process_count=1)
    with pytest.raises(ValueError, match="fingerprint"):
        other.set_state(state)


def test_two_hosts_concatenate_to_one(split):
    cfg = config(random_flip=True)
    whole = take(ImageTrainIterator(split, cfg, process_index=0, process_count=1), 6)
    halves = [take(ImageTrainIterator(split, cfg, process_index=i, process_count=2), 6)
              for i in range(2)]  # fmt: skip
    for one, a, b in zip(whole, *halves, strict=True):
        assert a["images"].shape == (4, H, W, C)
        for key in one:
            np.testing.assert_array_equal(np.concatenate([a[key], b[key]]), one[key])


def test_augmentation_shifts_images_differently_each_epoch(split):
    cfg = config(random_shift=1)
    iterator = ImageTrainIterator(split, cfg, process_index=0, process_count=1)
    seen = [{}, {}]  # epoch -> image index -> augmented image
    for epoch in range(2):
        for batch in take(iterator, 4):
            for label, image in zip(batch["labels"], batch["images"], strict=True):
                seen[epoch][label] = image
    changed, both = 0, set(seen[0]) & set(seen[1])
    for i in both:
        for image in (seen[0][i], seen[1][i]):
            assert any(np.array_equal(image, s) for s in shifts(split.images[i], 1))
        changed += not np.array_equal(seen[0][i], seen[1][i])
    assert len(both) > 20 and changed > len(both) // 2
    plain = take(ImageTrainIterator(split, config(random_shift=0), process_count=1), 1)[0]
    np.testing.assert_array_equal(plain["images"], split.images[plain["labels"]])


def test_shifts_start_at_random_shift_from_epoch(split):
    cfg = config(random_shift=1, random_flip=True, random_shift_from_epoch=1)
    late = take(ImageTrainIterator(split, cfg, process_count=1), 8)  # epochs 0 and 1
    flip_only = take(ImageTrainIterator(split, config(random_shift=0, random_flip=True),
                                        process_count=1), 4)  # fmt: skip
    from_start = take(ImageTrainIterator(split, config(random_shift=1, random_flip=True),
                                         process_count=1), 8)  # fmt: skip
    assert_same_batches(late[:4], flip_only)  # epoch 0: mirrored, never moved
    assert_same_batches(late[4:], from_start[4:])  # epoch 1: as without the field
    epoch0 = zip(late[:4], from_start[:4], strict=True)
    assert not all(np.array_equal(a["images"], b["images"]) for a, b in epoch0)
    state = ImageTrainIterator(split, cfg, process_count=1).get_state()
    with pytest.raises(ValueError, match="fingerprint"):
        ImageTrainIterator(split, config(random_shift=1, random_flip=True),
                           process_count=1).set_state(state)  # fmt: skip


def test_rotation_and_scaling_are_seeded_and_change_the_fingerprint(split):
    cfg = config(random_shift=0, random_rotate=15.0, random_scale=0.1)
    a = take(ImageTrainIterator(split, cfg, process_index=0, process_count=1), 3)
    b = take(ImageTrainIterator(split, cfg, process_index=0, process_count=1), 3)
    assert_same_batches(a, b)
    plain = take(ImageTrainIterator(split, config(random_shift=0), process_count=1), 3)
    for x, y in zip(a, plain, strict=True):
        np.testing.assert_array_equal(x["labels"], y["labels"])  # same order, new pixels
        assert not np.allclose(x["images"], y["images"])
    state = ImageTrainIterator(split, cfg, process_count=1).get_state()
    with pytest.raises(ValueError, match="fingerprint"):
        ImageTrainIterator(split, config(random_shift=0), process_count=1).set_state(state)


def test_eval_batches_cover_every_image_once(split):
    batches = image_eval_batches(split, config(), process_index=0, process_count=1)
    assert len(batches) == 5  # 37 = 4 * 8 + 5
    weights = np.concatenate([b["weights"] for b in batches])
    labels = np.concatenate([b["labels"] for b in batches])
    images = np.concatenate([b["images"] for b in batches])
    assert weights.tolist() == [1.0] * N + [0.0] * 3
    np.testing.assert_array_equal(labels[:N], np.arange(N))
    np.testing.assert_array_equal(images[:N], split.images)  # in order, not augmented
    assert not images[N:].any()
    hosts = [image_eval_batches(split, config(), process_index=i, process_count=2) for i in (0, 1)]
    for one, a, b in zip(batches, *hosts, strict=True):
        np.testing.assert_array_equal(np.concatenate([a["labels"], b["labels"]]), one["labels"])


def test_errors_say_what_to_change(split):
    with pytest.raises(ValueError, match="37 images, fewer than one batch of 40"):
        ImageTrainIterator(split, config(batch_size=40), process_index=0, process_count=1)
    with pytest.raises(ValueError, match="'batch_size': 8 rows do not split over 3"):
        ImageTrainIterator(split, config(), process_index=0, process_count=3)
    with pytest.raises(ValueError, match="'eval_batch_size': 8 rows do not split over 3"):
        image_eval_batches(split, config(), process_index=0, process_count=3)


def test_default_config_gives_digit_batches():
    cfg = default_image_data_config()
    dataset = load_image_dataset(cfg)
    batch = next(ImageTrainIterator(dataset.splits["train"], cfg, process_count=1))
    assert batch["images"].shape == (64, 8, 8, 1)
    assert 0.0 <= batch["images"].min() and batch["images"].max() <= 1.0
    assert set(batch["labels"]) <= set(range(10))
