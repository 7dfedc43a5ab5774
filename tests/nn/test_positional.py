"""Sinusoidal positional encoding (§3.5)."""

import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax.nn.positional import sinusoidal_encoding


def test_closed_form_interleaved():
    length, d = 13, 10
    pe = np.asarray(sinusoidal_encoding(length, d))
    assert pe.shape == (length, d)
    for pos in range(length):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i] == pytest.approx(np.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-5)


def test_closed_form_halves():
    """Marian's layout: the same frequencies, every sine in [0, D/2), every cosine in [D/2, D)."""
    positions, d = jnp.array([[0, 3, 11], [57, 1, 200]]), 10
    pe = np.asarray(sinusoidal_encoding(positions, d, layout="halves"))
    assert pe.shape == (2, 3, d)
    for b, row in enumerate(np.asarray(positions)):
        for t, pos in enumerate(row):
            for i in range(d // 2):
                angle = pos / 10000 ** (2 * i / d)
                assert pe[b, t, i] == pytest.approx(np.sin(angle), abs=1e-5)
                assert pe[b, t, d // 2 + i] == pytest.approx(np.cos(angle), abs=1e-5)


def test_halves_are_the_interleaved_features_reordered():
    d = 12
    interleaved = np.asarray(sinusoidal_encoding(9, d))
    halves = np.asarray(sinusoidal_encoding(9, d, layout="halves"))
    np.testing.assert_array_equal(halves, interleaved[:, [*range(0, d, 2), *range(1, d, 2)]])
    assert not np.allclose(halves, interleaved)


def test_unknown_layout_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"one of \('interleaved', 'halves'\), got 'split'"):
        sinusoidal_encoding(4, 8, layout="split")


def test_relative_position_is_a_fixed_rotation():
    """PE(pos + k) = R_k PE(pos) for every frequency pair, with R_k independent of pos."""
    d, k = 16, 7
    pe = np.asarray(sinusoidal_encoding(64, d), np.float64)
    for i in range(d // 2):
        w = 1.0 / 10000 ** (2 * i / d)
        rot = np.array([[np.cos(k * w), -np.sin(k * w)], [np.sin(k * w), np.cos(k * w)]])
        pair = pe[:, 2 * i : 2 * i + 2]  # rows (sin, cos)
        np.testing.assert_allclose(pair[k:], pair[:-k] @ rot, atol=1e-4)


def test_explicit_positions_restart_for_packed_rows():
    positions = jnp.array([[0, 1, 2, 0, 1], [0, 1, 2, 3, 4]])
    pe = sinusoidal_encoding(positions, 8)
    assert pe.shape == (2, 5, 8)
    table = sinusoidal_encoding(5, 8)
    np.testing.assert_allclose(pe[0, 3:], table[:2], atol=1e-6)
    np.testing.assert_allclose(pe[1], table, atol=1e-6)


@pytest.mark.parametrize("d", [7, 0, -2])
def test_bad_d_model_is_a_clear_error(d):
    with pytest.raises(ValueError, match="even d_model"):
        sinusoidal_encoding(4, d)
