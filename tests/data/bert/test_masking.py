"""BERT masking statistics on a large sample: 15% of maskable tokens, 80/10/10, never special
or padding tokens, reproducible from the seed (toward issue 11)."""

import numpy as np
import pytest

from transformer_jax.data.bert.masking import mask_tokens
from transformer_jax.tokens import CLS_ID, FIRST_REGULAR_ID, MASK_ID, PAD_ID, SEP_ID

V = 1000


def _rows(rows=2000, length=128, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(FIRST_REGULAR_ID, V, (rows, length))
    lengths = rng.integers(20, length + 1, rows)
    tokens[:, 0] = CLS_ID
    for r, n in enumerate(lengths):
        tokens[r, n // 2] = SEP_ID
        tokens[r, n - 1] = SEP_ID
        tokens[r, n:] = PAD_ID
    return tokens


def test_fifteen_percent_split_80_10_10_and_never_specials():
    tokens = _rows()
    inputs, targets, weights = mask_tokens(tokens, np.random.default_rng(1), vocab_size=V)
    selected = weights > 0
    maskable = tokens >= FIRST_REGULAR_ID
    assert not (selected & ~maskable).any()  # never [CLS], [SEP], padding
    np.testing.assert_array_equal(inputs[~selected], tokens[~selected])  # others untouched
    np.testing.assert_array_equal(targets, tokens)
    assert selected.sum() / maskable.sum() == pytest.approx(0.15, abs=0.005)
    as_mask = (inputs == MASK_ID) & selected
    as_random = (inputs != MASK_ID) & (inputs != tokens) & selected
    kept = (inputs == tokens) & selected
    n = selected.sum()
    assert as_mask.sum() / n == pytest.approx(0.8, abs=0.01)
    # A random replacement equals the original 1 time in ~1000: counted as kept.
    assert as_random.sum() / n == pytest.approx(0.1, abs=0.01)
    assert kept.sum() / n == pytest.approx(0.1, abs=0.01)
    assert (inputs[as_random] >= FIRST_REGULAR_ID).all()  # random ids are ordinary pieces


def test_every_row_with_maskable_tokens_gets_one_and_the_seed_decides():
    tokens = np.array([[CLS_ID, 10, SEP_ID, PAD_ID], [CLS_ID, SEP_ID, PAD_ID, PAD_ID]])
    _, _, weights = mask_tokens(tokens, np.random.default_rng(0), vocab_size=V)
    assert weights.tolist() == [[0, 1, 0, 0], [0, 0, 0, 0]]
    tokens = _rows(rows=50)
    a = mask_tokens(tokens, np.random.default_rng(7), vocab_size=V)
    b = mask_tokens(tokens, np.random.default_rng(7), vocab_size=V)
    c = mask_tokens(tokens, np.random.default_rng(8), vocab_size=V)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[2], c[2])


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="mask rate"):
        mask_tokens(_rows(rows=2), np.random.default_rng(0), vocab_size=V, rate=0.0)
    with pytest.raises(ValueError, match="no ordinary ids"):
        mask_tokens(_rows(rows=2), np.random.default_rng(0), vocab_size=FIRST_REGULAR_ID)
