"""Nearest documents by shared tokens and token pairs: order, ties, self excluded, bad input."""

import numpy as np
import pytest

from transformer_jax.data.bert.neighbours import nearest_documents


def test_shared_words_in_the_same_order_come_first():
    docs = [
        [[1, 2, 3]],  # 0
        [[2, 1, 4]],  # 1: shares 1, 2 but no pair
        [[1, 2, 4]],  # 2: shares 1, 2 and the pair (1, 2)
        [[7, 8, 9]],  # 3: shares nothing
        [[1, 2, 3]],  # 4: not a member
    ]
    near = nearest_documents(docs, members=[0, 1, 2, 3], k=2)
    assert near[0] == [2, 1]
    assert near[3] == [0, 1]  # all similarities 0: the lowest indices, never itself
    assert set(near) == {0, 1, 2, 3} and all(4 not in v for v in near.values())


def test_cosine_matches_a_direct_computation_across_blocks():
    rng = np.random.default_rng(0)
    docs = [[rng.integers(0, 12, int(rng.integers(2, 9))).tolist()] for _ in range(40)]
    near = nearest_documents(docs, members=range(5, 40), k=3, block=4)

    def vector(doc):
        v = np.zeros(12 + 12 * 12)
        for s in doc:
            for t in s:
                v[t] += 1
            for a, b in zip(s, s[1:], strict=False):
                v[12 + 12 * a + b] += 1
        return v / np.linalg.norm(v)

    vectors = {m: vector(docs[m]) for m in range(5, 40)}
    for m, got in near.items():
        sims = {o: vectors[m] @ vectors[o] for o in vectors if o != m}
        want = sorted(sims, key=lambda o: (-round(sims[o], 6), o))[:3]
        assert [round(sims[o], 6) for o in got] == [round(sims[o], 6) for o in want]


def test_fewer_members_than_k_gives_all_others():
    docs = [[[1]], [[2]], [[1, 2]]]
    assert nearest_documents(docs, members=[0, 2], k=5) == {0: [2], 2: [0]}
    assert nearest_documents(docs, members=[1], k=5) == {1: []}


@pytest.mark.parametrize("members, k, message", [([0, 0], 1, "more than once"), ([0], 0, "k=0")])
def test_bad_arguments_are_named(members, k, message):
    with pytest.raises(ValueError, match=message):
        nearest_documents([[[1]]], members=members, k=k)
