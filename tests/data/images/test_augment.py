"""Random shifts and flips: shapes kept, content moved within bounds, 0 = identity."""

import numpy as np
import pytest

from transformer_jax.data.images.augment import augment_batch, random_flip, random_shift

B, H, W, C = 64, 7, 9, 2  # all different, so a swapped axis cannot pass


def one_pixel_images():
    images = np.zeros((B, H, W, C), np.float32)
    images[:, 3, 4, 1] = 1.0
    return images


def test_shift_moves_a_pixel_by_at_most_max_shift():
    images = one_pixel_images()
    out = random_shift(images, 2, np.random.default_rng(0))
    assert out.shape == (B, H, W, C) and out.dtype == np.float32
    assert np.all(images[:, 3, 4, 1] == 1.0)  # input untouched
    offsets = set()
    for image in out:
        y, x, c = np.argwhere(image == 1.0)[0]
        assert image.sum() == 1.0 and c == 1
        assert abs(y - 3) <= 2 and abs(x - 4) <= 2
        offsets.add((y - 3, x - 4))
    assert len(offsets) > 10  # many of the 25 offsets occur: the content really moves


def test_shift_fills_the_border_with_zeros():
    images = np.ones((B, H, W, C), np.float32)
    out = random_shift(images, 1, np.random.default_rng(1))
    zero_rows = (out == 0).all(axis=(2, 3)).sum(axis=1)  # rows fully vacated per image
    zero_cols = (out == 0).all(axis=(1, 3)).sum(axis=1)
    assert set(zero_rows) == {0, 1} and set(zero_cols) == {0, 1}
    assert np.all(out.sum(axis=(1, 2, 3)) >= (H - 1) * (W - 1) * C)


def test_zero_shift_is_identity():
    images = np.random.default_rng(2).random((B, H, W, C), np.float32)
    assert np.array_equal(random_shift(images, 0, np.random.default_rng(0)), images)


def test_negative_shift_is_an_error():
    with pytest.raises(ValueError, match="max_shift=-1"):
        random_shift(one_pixel_images(), -1, np.random.default_rng(0))


def test_flip_mirrors_about_half():
    images = np.random.default_rng(3).random((B, H, W, C), np.float32)
    out = random_flip(images, np.random.default_rng(4))
    flipped = np.array([np.array_equal(o, i[:, ::-1]) for o, i in zip(out, images, strict=True)])
    kept = np.array([np.array_equal(o, i) for o, i in zip(out, images, strict=True)])
    assert np.all(flipped ^ kept)
    assert 16 < flipped.sum() < 48


def test_augment_batch_is_deterministic_for_a_generator_seed():
    images = np.random.default_rng(5).random((B, H, W, C), np.float32)
    a = augment_batch(images, 1, True, np.random.default_rng(7))
    b = augment_batch(images, 1, True, np.random.default_rng(7))
    assert np.array_equal(a, b) and not np.array_equal(a, images)
