"""Batch construction, the length filter, bucket row counts and the packer, on hand-made pairs."""

import numpy as np
import pytest

from transformer_jax.data.translation import (
    BATCH_KEYS,
    PACKED_KEYS,
    SpecialIds,
    TokenizedPairs,
    build_batch,
    filter_by_length,
    padded_batch,
    planning,
)


def make_pairs(pairs):
    """TokenizedPairs from lists of ids."""

    def flat(seqs):
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in seqs])]).astype(np.int64)
        return np.array([t for s in seqs for t in s], np.int32), offsets

    return TokenizedPairs(*flat([s for s, _ in pairs]), *flat([t for _, t in pairs]))


PAIRS = make_pairs([([10, 11, 12], [20, 21]), ([13], [22, 23, 24, 25]), ([14, 15], [26])])


def test_padded_batch_layout():
    batch = padded_batch(PAIRS, np.array([1, -1, 0]), length=7, tgt_length=6)
    assert set(batch) == set(BATCH_KEYS)
    assert {k: (v.shape, v.dtype) for k, v in batch.items()} == {
        "src": ((3, 7), np.int32),
        "tgt_in": ((3, 6), np.int32),
        "tgt_out": ((3, 6), np.int32),
        "weights": ((3, 6), np.float32),
    }
    np.testing.assert_array_equal(
        batch["src"], [[13, 1, 0, 0, 0, 0, 0], [0] * 7, [10, 11, 12, 1, 0, 0, 0]]
    )
    np.testing.assert_array_equal(
        batch["tgt_in"], [[2, 22, 23, 24, 25, 0], [0] * 6, [2, 20, 21, 0, 0, 0]]
    )
    np.testing.assert_array_equal(
        batch["tgt_out"], [[22, 23, 24, 25, 1, 0], [0] * 6, [20, 21, 1, 0, 0, 0]]
    )
    np.testing.assert_array_equal(
        batch["weights"], [[1, 1, 1, 1, 1, 0], [0] * 6, [1, 1, 1, 0, 0, 0]]
    )


def test_a_tokenizers_own_ids_lay_out_the_batch():
    """OPUS-MT's ids: <pad> (9 here) pads and starts the decoder, </s> is 0. The weights come
    from the lengths, so every eos 0 counts and no padding does."""
    ids = SpecialIds(pad=9, bos=9, eos=0)
    batch = padded_batch(PAIRS, np.array([1, -1, 0]), length=7, tgt_length=6, ids=ids)
    np.testing.assert_array_equal(
        batch["src"], [[13, 0, 9, 9, 9, 9, 9], [9] * 7, [10, 11, 12, 0, 9, 9, 9]]
    )
    np.testing.assert_array_equal(
        batch["tgt_in"], [[9, 22, 23, 24, 25, 9], [9] * 6, [9, 20, 21, 9, 9, 9]]
    )
    np.testing.assert_array_equal(
        batch["tgt_out"], [[22, 23, 24, 25, 0, 9], [9] * 6, [20, 21, 0, 9, 9, 9]]
    )
    np.testing.assert_array_equal(
        batch["weights"], [[1, 1, 1, 1, 1, 0], [0] * 6, [1, 1, 1, 0, 0, 0]]
    )
    packed = build_batch(
        PAIRS, np.array([0, 2]), np.array([0, 0]), np.array([0, 4]), np.array([0, 3]),
        np.array([1, 2]), num_rows=1, src_len=8, tgt_len=7, packed=True, ids=ids,
    )  # fmt: skip
    np.testing.assert_array_equal(packed["src"][0], [10, 11, 12, 0, 14, 15, 0, 9])
    np.testing.assert_array_equal(packed["tgt_in"][0], [9, 20, 21, 9, 26, 9, 9])
    np.testing.assert_array_equal(packed["tgt_out"][0], [20, 21, 0, 26, 0, 9, 9])
    np.testing.assert_array_equal(packed["weights"][0], [1, 1, 1, 1, 1, 0, 0])


def test_packed_batch_layout():
    # Pairs 0 and 2 share row 0, pair 1 sits alone in row 1; row 2 is padding.
    batch = build_batch(
        PAIRS,
        examples=np.array([0, 2, 1]),
        rows=np.array([0, 0, 1]),
        src_starts=np.array([0, 4, 0]),
        tgt_starts=np.array([0, 3, 0]),
        segments=np.array([1, 2, 1]),
        num_rows=3,
        src_len=8,
        tgt_len=7,
        packed=True,
    )
    assert set(batch) == set(PACKED_KEYS)
    np.testing.assert_array_equal(batch["src"][0], [10, 11, 12, 1, 14, 15, 1, 0])
    np.testing.assert_array_equal(batch["src_segment_ids"][0], [1, 1, 1, 1, 2, 2, 2, 0])
    np.testing.assert_array_equal(batch["src_positions"][0], [0, 1, 2, 3, 0, 1, 2, 0])
    np.testing.assert_array_equal(batch["tgt_in"][0], [2, 20, 21, 2, 26, 0, 0])
    np.testing.assert_array_equal(batch["tgt_out"][0], [20, 21, 1, 26, 1, 0, 0])
    np.testing.assert_array_equal(batch["tgt_segment_ids"][0], [1, 1, 1, 2, 2, 0, 0])
    np.testing.assert_array_equal(batch["tgt_positions"][0], [0, 1, 2, 0, 1, 0, 0])
    np.testing.assert_array_equal(batch["tgt_out"][1], [22, 23, 24, 25, 1, 0, 0])
    np.testing.assert_array_equal(batch["weights"][1], [1, 1, 1, 1, 1, 0, 0])
    assert not batch["src"][2].any() and not batch["weights"][2].any()
    assert all(v.dtype == (np.float32 if k == "weights" else np.int32) for k, v in batch.items())


def test_filter_by_length_counts_and_keeps_order():
    kept, dropped = filter_by_length(PAIRS, max_len=4)  # Pair 1's target + eos is 5.
    assert dropped == 1 and len(kept) == 2
    assert [p.tolist() for p in kept.pair(1)] == [[14, 15], [26]]
    assert filter_by_length(PAIRS, max_len=5) == (PAIRS, 0)


def test_rows_fill_the_token_budget():
    rows = planning.rows_per_bucket(1000, (16, 24, 40), batch_multiple=8, process_count=1)
    assert rows == (56, 40, 24)  # 56*16=896 <= 1000 < 64*16; rows divisible by 8.
    # Two hosts: global rows still divisible by 8, each host yields half.
    assert planning.rows_per_bucket(1000, (16, 24, 40), 8, 2) == (28, 20, 12)
    # Three hosts and 8 devices: global rows divisible by lcm(8, 3) = 24.
    assert planning.rows_per_bucket(1000, (16,), 8, 3) == (16,)
    with pytest.raises(ValueError, match="field 'tokens_per_batch': 100 tokens cannot hold 8 rows"):
        planning.rows_per_bucket(100, (16,), 8, 1)


def test_assign_buckets_takes_the_first_that_fits_both_sides():
    src, tgt = np.array([3, 15, 16, 2, 30]), np.array([3, 2, 2, 15, 31])
    np.testing.assert_array_equal(planning.assign_buckets(src, tgt, (16, 32)), [0, 0, 1, 0, 1])


def test_packer_places_each_pair_once_without_overlap():
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(0, 20, 500), rng.integers(0, 20, 500)
    plan = planning.plan_packed_epoch(src, tgt, length=32, seed=0, epoch=0)
    assert sorted(plan.examples.tolist()) == list(range(500))
    assert np.all(np.diff(plan.rows) >= 0)
    for side, lengths, starts in (("src", src, plan.src_starts), ("tgt", tgt, plan.tgt_starts)):
        ends = starts + lengths[plan.examples] + 1
        assert ends.max() <= 32, side
        for row in range(plan.num_rows):
            in_row = plan.rows == row
            order = np.argsort(plan.segments[in_row])
            # Segments 1, 2, ... lie one after another from column 0.
            assert plan.segments[in_row][order].tolist() == list(range(1, in_row.sum() + 1))
            np.testing.assert_array_equal(starts[in_row][order][1:], ends[in_row][order][:-1])
            assert starts[in_row][order][0] == 0
    fill = (src.sum() + 500) / (plan.num_rows * 32)
    assert fill > 0.85, fill  # First fit over 8 open rows packs tightly.
    other = planning.plan_packed_epoch(src, tgt, length=32, seed=0, epoch=1)
    assert not np.array_equal(other.examples, plan.examples)
