"""Random shifts, flips, rotations and scalings: shapes kept, content moved within bounds,
0 = identity."""

import numpy as np
import pytest

from transformer_jax.data.images.augment import (
    augment_batch,
    random_flip,
    random_rotate_and_scale,
    random_shift,
    rotate_and_scale,
)

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


def test_rotation_and_scaling_by_their_definition():
    images = np.zeros((3, 8, 8, 1), np.float32)
    images[:, 1, 3:5, 0] = 1.0  # a bar across the top
    out = rotate_and_scale(images, np.array([0.0, np.pi / 2, 0.0]), np.array([1.0, 1.0, 0.5]))
    np.testing.assert_allclose(out[0], images[0], atol=1e-6)  # identity
    expected = np.zeros((8, 8), np.float32)
    expected[3:5, 6] = 1.0  # a quarter turn clockwise: the top bar is now on the right
    np.testing.assert_allclose(out[1, ..., 0], expected, atol=1e-6)
    # Half size: output pixel p reads the input at 2p (about the centre 3.5), bilinearly.
    y, x = np.meshgrid(np.arange(8) - 3.5, np.arange(8) - 3.5, indexing="ij")
    sy, sx = 2 * y + 3.5, 2 * x + 3.5
    want = np.zeros((8, 8), np.float32)
    for i in range(8):
        for j in range(8):
            for yy in range(8):
                for xx in range(8):
                    weight = max(0, 1 - abs(sy[i, j] - yy)) * max(0, 1 - abs(sx[i, j] - xx))
                    want[i, j] += weight * images[2, yy, xx, 0]
    np.testing.assert_allclose(out[2, ..., 0], want, atol=1e-6)
    assert 0 < out[2].sum() < images[2].sum()


def test_random_rotation_and_scale_keep_ink_near_its_place_and_vary():
    images = np.random.default_rng(6).random((B, H, W, C), np.float32)
    images[:, 0, :] = images[:, -1, :] = images[:, :, 0] = images[:, :, -1] = 0
    out = random_rotate_and_scale(images, 10.0, 0.1, np.random.default_rng(7))
    assert out.shape == (B, H, W, C) and out.dtype == np.float32
    assert np.all(out >= 0) and np.all(out <= 1 + 1e-6)
    ratio = out.sum(axis=(1, 2, 3)) / images.sum(axis=(1, 2, 3))
    assert np.all((0.6 < ratio) & (ratio < 1.4))  # ink is moved, not created or lost
    assert len({round(float(r), 4) for r in ratio}) > B // 2  # each image its own transform
    same = random_rotate_and_scale(images, 0.0, 0.0, np.random.default_rng(7))
    np.testing.assert_allclose(same, images, atol=1e-6)


@pytest.mark.parametrize("degrees, scale", [(-1.0, 0.0), (0.0, 1.0), (0.0, -0.1)])
def test_bad_rotation_or_scale_is_an_error(degrees, scale):
    with pytest.raises(ValueError, match="max_degrees"):
        random_rotate_and_scale(one_pixel_images(), degrees, scale, np.random.default_rng(0))
