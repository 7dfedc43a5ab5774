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


def _words(tokens, starts):
    """Each maskable position's word: from a word start (or after a special) to the next."""
    words, current = np.full(tokens.shape, -1), -1
    for r, row in enumerate(tokens):
        for i, t in enumerate(row):
            if t < FIRST_REGULAR_ID:
                current = -1
                continue
            if starts[t] or current < 0 or i == 0:
                current = r * 1000 + i
            words[r, i] = current
    return words


def test_whole_word_masking_selects_every_piece_of_a_word_or_none():
    starts = np.random.default_rng(5).random(V) < 0.3  # about 3 pieces a word
    tokens = _rows(rows=400)
    inputs, targets, weights = mask_tokens(
        tokens, np.random.default_rng(1), vocab_size=V, word_starts=starts
    )
    selected, maskable = weights > 0, tokens >= FIRST_REGULAR_ID
    assert not (selected & ~maskable).any()
    words = _words(tokens, starts)
    for w in np.unique(words[words >= 0]):
        assert len(set(selected[words == w].tolist())) == 1  # the whole word, or none of it
    # Never more than the row's share; words are skipped when they would overshoot.
    wanted = np.maximum(1, np.rint(0.15 * maskable.sum(1)))
    assert (selected.sum(1) <= wanted).all()
    assert selected.sum() / maskable.sum() == pytest.approx(0.15, abs=0.01)
    np.testing.assert_array_equal(inputs[~selected], tokens[~selected])
    assert (inputs[selected] == MASK_ID).mean() == pytest.approx(0.8, abs=0.02)


def test_whole_word_masking_picks_the_shortest_word_when_none_fits():
    starts = np.zeros(V, bool)
    starts[[10, 20]] = True
    # One maskable run: word [10, 11, 12] and word [20, 21]; 15% of 5 rounds to one piece.
    tokens = np.array([[CLS_ID, 10, 11, 12, 20, 21, SEP_ID, PAD_ID]])
    _, _, weights = mask_tokens(tokens, np.random.default_rng(0), vocab_size=V, word_starts=starts)
    assert weights.tolist() == [[0, 0, 0, 0, 1, 1, 0, 0]]
    # A special ends a word: 11 after [SEP] begins a word of its own.
    tokens = np.array([[CLS_ID, 10, 11, SEP_ID, 11, 12, SEP_ID, PAD_ID]])
    _, _, weights = mask_tokens(tokens, np.random.default_rng(0), vocab_size=V, word_starts=starts)
    assert weights.tolist() in ([[0, 1, 1, 0, 0, 0, 0, 0]], [[0, 0, 0, 0, 1, 1, 0, 0]])
