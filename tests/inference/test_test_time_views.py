"""Test-time augmentation of images: which views are scored, and the mean of their class
probabilities, by hand."""

import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.data.images.augment import random_shift
from transformer_jax.inference.image_classifier import (
    mirror_averaged_logits,
    scoring_views,
    view_averaged_logits,
)


def _softmax(z):
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


@pytest.mark.parametrize("flip", [False, True])
@pytest.mark.parametrize("shift", [0, 1, 2])
def test_views_are_the_image_and_its_mirror_moved_by_every_offset_up_to_shift(flip, shift):
    image = np.zeros((1, 7, 7, 1), np.float32)
    image[0, 3, 2, 0] = 1.0  # One lit pixel, off the mirror axis: each view says where it went.
    views = [np.asarray(v) for v in scoring_views(jnp.asarray(image), flip, shift)]
    assert len(views) == (2 if flip else 1) * (2 * shift + 1) ** 2
    np.testing.assert_array_equal(views[0], image)  # The unmoved image first ...
    if flip:
        np.testing.assert_array_equal(views[1], image[:, :, ::-1])  # ... then its mirror.
    lit = sorted(tuple(int(i) for i in np.argwhere(v[0, :, :, 0])[0]) for v in views)
    expected = sorted(
        (3 + dy, x + dx)
        for x in ([2, 4] if flip else [2])
        for dy in range(-shift, shift + 1)
        for dx in range(-shift, shift + 1)
    )
    assert lit == expected  # Every offset once, for the image and for its mirror.


def test_a_view_is_what_random_shift_makes_with_the_same_offsets():
    rng = np.random.default_rng(3)
    images = rng.random((4, 6, 5, 2)).astype(np.float32)
    views = [np.asarray(v) for v in scoring_views(jnp.asarray(images), False, 1)]
    used = set()
    for seed in range(12):
        moved = random_shift(images, 1, np.random.default_rng(seed))
        for row in range(len(images)):  # each row moved by its own offset: find its view
            found = [i for i, v in enumerate(views) if np.array_equal(v[row], moved[row])]
            assert len(found) == 1, f"seed {seed}, row {row}: random_shift's move is no view"
            used.add(found[0])
    assert len(used) == 9  # 48 random moves met every one of the 9 views.


@pytest.mark.parametrize("flip,shift", [(True, 0), (False, 1), (True, 1)])
def test_view_averaged_logits_are_the_log_of_the_views_mean_probabilities(flip, shift):
    rng = np.random.default_rng(0)
    images = rng.random((3, 4, 5, 1)).astype(np.float32)
    weights = rng.normal(size=(20, 6)).astype(np.float32)

    def logits_fn(x):  # neither mirror- nor shift-invariant: the pixels' places matter
        return jnp.asarray(x).reshape(len(x), -1) @ weights

    views = scoring_views(jnp.asarray(images), flip, shift)
    mean = np.mean([_softmax(np.asarray(logits_fn(v))) for v in views], axis=0)
    got = np.asarray(view_averaged_logits(logits_fn, jnp.asarray(images), flip, shift))
    np.testing.assert_allclose(np.exp(got), mean, rtol=1e-5)  # normalised already
    assert not np.allclose(_softmax(np.asarray(logits_fn(images))), mean, atol=1e-3)
    if flip and not shift:
        mirrored = np.asarray(mirror_averaged_logits(logits_fn, jnp.asarray(images)))
        np.testing.assert_allclose(mirrored, got, rtol=1e-6)
