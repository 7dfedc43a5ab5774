"""NSP pairs: balanced IsNext / NotNext, IsNext segments consecutive in one document, NotNext
from another document, everything fits the row, segment ids laid out (toward issue 11)."""

import numpy as np
import pytest

from transformer_jax.data.bert.pairs import encode_pair, make_pairs
from transformer_jax.tokens import CLS_ID, PAD_ID, SEP_ID


def _documents(count=200, seed=0):
    """Sentence s of document d is [1000 + 100 * d + s] * its length: provenance is readable."""
    rng = np.random.default_rng(seed)
    return [
        [[1000 + 100 * d + s] * int(rng.integers(3, 20)) for s in range(int(rng.integers(1, 12)))]
        for d in range(count)
    ]


def test_pairs_are_balanced_consecutive_and_fit():
    docs = _documents(count=2000)
    pairs = make_pairs(docs, np.random.default_rng(1), max_len=64)
    assert len(pairs) > 2000
    share = np.mean([p.is_next for p in pairs])
    assert share == pytest.approx(0.5, abs=0.04)  # about 4 standard deviations
    for p in pairs:
        assert 2 + len(p.a) + len(p.b) + 1 <= 64 and p.a and p.b
        d_a, a0, a1, d_b, b0, b1 = p.source
        assert set(p.a) <= {1000 + 100 * d_a + s for s in range(a0, a1)}
        assert set(p.b) <= {1000 + 100 * d_b + s for s in range(b0, b1)}
        if p.is_next:
            assert d_a == d_b and b0 == a1  # B starts where A ends
        else:
            assert d_a != d_b
        assert p.a == sorted(p.a) and p.b == sorted(p.b)  # sentences in document order


def test_groups_keep_not_next_inside_a_group():
    docs = _documents(count=300)
    groups = [d % 3 for d in range(300)]
    pairs = make_pairs(docs, np.random.default_rng(2), max_len=64, groups=groups)
    not_next = [p.source for p in pairs if not p.is_next]
    assert len(not_next) > 150
    assert all(d_a != d_b and groups[d_a] == groups[d_b] for d_a, *_, d_b, _, _ in not_next)
    # One group of everything draws exactly as no groups (BERT's pairs, same random stream).
    assert make_pairs(docs, np.random.default_rng(2), max_len=64, groups=[5] * 300) == make_pairs(
        docs, np.random.default_rng(2), max_len=64
    )


def test_aligned_groups_start_not_next_where_the_next_text_would():
    # Documents of one layout: sentence 0 "English" (2 tokens), sentence 1 "French" (3 tokens).
    docs = [[[10 + d] * 2, [500 + d] * 3] for d in range(100)] + [[[1], [2], [3]]]
    groups = [1] * 100 + [0]
    pairs = make_pairs(docs, np.random.default_rng(0), max_len=32, groups=groups, aligned=(1,))
    numbers = [p for p in pairs if p.source[0] < 100]
    assert {p.is_next for p in numbers} == {True, False}
    for p in numbers:
        d_a, a0, a1, d_b, b0, b1 = p.source
        assert (a0, a1, b0, b1) == (0, 1, 1, 2) and p.b == [500 + d_b] * 3  # B: a French
        assert (d_a == d_b) == p.is_next and d_b < 100
    # A document alone in its group has no other to draw from: IsNext only.
    assert all(p.is_next for p in pairs if p.source[0] == 100)


def test_partners_choose_each_documents_not_next():
    docs = _documents(count=60)
    partners = {d: [(d + 1) % 60, (d + 7) % 60] for d in range(0, 60, 2)}
    partners[1] = []  # no partner: IsNext only
    pairs = make_pairs(docs, np.random.default_rng(3), max_len=64, partners=partners)
    not_next = [p.source for p in pairs if not p.is_next]
    assert {d for d, *_ in not_next} & set(partners) - {1}  # listed documents do make NotNext
    for d_a, *_, d_b, _, _ in not_next:
        assert d_b in partners[d_a] if d_a in partners else d_b != d_a
    assert all(p.is_next for p in pairs if p.source[0] == 1)
    # Every document listed with its whole group (in order) draws exactly as the group does.
    whole = {d: [o for o in range(60) if o != d] for d in range(60)}
    rng = np.random.default_rng(3)
    assert make_pairs(docs, rng, max_len=64, partners=whole) == make_pairs(
        docs, np.random.default_rng(3), max_len=64
    )


@pytest.mark.parametrize("partners", [{0: [0]}, {0: [3]}, {5: [1]}])
def test_partners_outside_the_documents_or_itself_are_refused(partners):
    with pytest.raises(ValueError, match=r"partners\[\d\]"):
        make_pairs(_documents(count=3), np.random.default_rng(0), max_len=64, partners=partners)


def test_groups_must_name_every_document():
    with pytest.raises(ValueError, match="2 groups for 3 documents"):
        make_pairs(_documents(count=3), np.random.default_rng(0), max_len=64, groups=[0, 0])


def test_long_pairs_are_truncated_from_the_longer_segment():
    docs = [[[7] * 50, [8] * 10], [[9] * 40]]
    pairs = make_pairs(docs, np.random.default_rng(0), max_len=32, short_prob=0.0)
    for p in pairs:
        assert len(p.a) + len(p.b) == 29  # budget 32 - 3, both long enough to fill it
        assert min(len(p.a), len(p.b)) >= min(10, 29 // 2)


def test_encode_pair_layout():
    (pair,) = make_pairs([[[11, 12], [13]]], np.random.default_rng(0), max_len=10)
    tokens, segments = encode_pair(pair, 10)
    assert tokens.tolist() == [CLS_ID, 11, 12, SEP_ID, 13, SEP_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]
    assert segments.tolist() == [0, 0, 0, 0, 1, 1, 0, 0, 0, 0]
    assert pair.is_next  # one document: B is always the real continuation
    with pytest.raises(ValueError, match="no room"):
        make_pairs([[[1]]], np.random.default_rng(0), max_len=4)
