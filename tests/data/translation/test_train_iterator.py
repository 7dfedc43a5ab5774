"""The training iterator: shapes and budgets, packing, determinism, host shards, resumption."""

import collections
import json

import numpy as np
import pytest

from transformer_jax.data.tokenizer import train_tokenizer
from transformer_jax.data.translation import (
    BATCH_KEYS,
    PACKED_KEYS,
    filter_by_length,
    get_pairs,
    make_train_iterator,
    tokenized_split,
)


def epoch_of(iterator):
    """The remaining batches of the iterator's current epoch."""
    return [next(iterator) for _ in range(iterator.batches_in_epoch)]


def unpacked_pairs(batches):
    """(source ids, target ids) of every non-empty row, eos excluded."""
    pairs = []
    for batch in batches:
        for src, tgt_out in zip(batch["src"], batch["tgt_out"], strict=True):
            if src.any():
                pairs.append(
                    (tuple(src[: np.argmax(src == 1)]), tuple(tgt_out[: np.argmax(tgt_out == 1)]))
                )
    return pairs


def packed_pairs(batches):
    """(source ids, target ids) of every segment, checking the packed layout on the way."""
    pairs = []
    for batch in batches:
        for r in range(batch["src"].shape[0]):
            sides = {}
            for side, tokens in (("src", batch["src"][r]), ("tgt", batch["tgt_out"][r])):
                seg, pos = batch[f"{side}_segment_ids"][r], batch[f"{side}_positions"][r]
                used = int((seg > 0).sum())
                assert not seg[used:].any() and not tokens[used:].any()  # Padding at the end.
                assert np.all(np.diff(seg[:used]) >= 0) and np.all(np.diff(seg[:used]) <= 1)
                sides[side] = []
                for s in range(1, seg.max() + 1):
                    cols = np.flatnonzero(seg == s)
                    np.testing.assert_array_equal(pos[cols], np.arange(len(cols)))
                    assert tokens[cols[-1]] == 1 and 1 not in tokens[cols[:-1]]  # One eos, last.
                    sides[side].append((cols, tuple(tokens[cols[:-1]])))
            assert len(sides["src"]) == len(sides["tgt"])
            for (_, src), (cols, tgt) in zip(sides["src"], sides["tgt"], strict=True):
                np.testing.assert_array_equal(batch["tgt_in"][r][cols], (2, *tgt))  # bos+target
                assert batch["weights"][r][cols].all()
                pairs.append((src, tgt))
            assert batch["weights"][r].sum() == sum(len(c) for c, _ in sides["tgt"])
    return pairs


def dataset_pairs(cfg, tokenizer, workdir, process_index=0, process_count=1):
    tokens, _ = tokenized_split(cfg, tokenizer, "train", workdir, process_index, process_count)
    tokens, _ = filter_by_length(tokens, cfg.max_len)
    return [tuple(tuple(side.tolist()) for side in tokens.pair(i)) for i in range(len(tokens))]


def test_bucketed_shapes_budgets_and_one_epoch(make_cfg, tokenizer, workdir):
    cfg = make_cfg()  # max_len 32, 4 buckets, 1024 tokens, rows divisible by 8.
    iterator = make_train_iterator(cfg, tokenizer, workdir, process_index=0, process_count=1)
    assert iterator.lengths == (8, 16, 24, 32)
    assert iterator.rows == (128, 64, 40, 32)
    batches = epoch_of(iterator)
    shapes = collections.Counter(b["src"].shape for b in batches)
    assert set(shapes) <= {(128, 8), (64, 16), (40, 24), (32, 32)} and len(shapes) >= 2
    for batch in batches:
        assert set(batch) == set(BATCH_KEYS)
        rows, length = batch["src"].shape
        assert rows % 8 == 0 and rows * length <= 1024 < (rows + 8) * length
        assert batch["tgt_in"].shape == batch["tgt_out"].shape == batch["weights"].shape
        assert batch["src"].dtype == np.int32 and batch["weights"].dtype == np.float32
        np.testing.assert_array_equal(batch["weights"], batch["tgt_out"] > 0)
        np.testing.assert_array_equal(
            batch["tgt_in"][:, 1:] * batch["weights"][:, 1:],
            batch["tgt_out"][:, :-1] * batch["weights"][:, 1:],
        )
    got = unpacked_pairs(batches)
    assert collections.Counter(got) == collections.Counter(dataset_pairs(cfg, tokenizer, workdir))
    # Each pair sits in the first bucket that holds it.
    for batch in batches:
        length = batch["src"].shape[1]
        need = np.maximum((batch["src"] > 0).sum(1), (batch["tgt_out"] > 0).sum(1))
        assert np.all(need[need > 0] > length - 8)
    # The next epoch has the same pairs in a new order.
    again = epoch_of(iterator)
    assert iterator.epoch == 1
    assert collections.Counter(unpacked_pairs(again)) == collections.Counter(got)

    # Reshuffled, not merely reordered: batches are made of other pairs.
    def compositions(batches):
        return {frozenset(unpacked_pairs([b])) for b in batches}

    assert len(compositions(again) & compositions(batches)) < len(batches) // 2


def test_packed_epoch_loses_and_duplicates_no_token(make_cfg, tokenizer, workdir):
    cfg = make_cfg(pack=True)
    iterator = make_train_iterator(cfg, tokenizer, workdir, process_index=0, process_count=1)
    batches = epoch_of(iterator)
    assert {b["src"].shape for b in batches} == {(32, 32)}
    assert all(set(b) == set(PACKED_KEYS) for b in batches)
    got = packed_pairs(batches)
    assert collections.Counter(got) == collections.Counter(dataset_pairs(cfg, tokenizer, workdir))
    used = sum(b["weights"].sum() for b in batches) / sum(b["weights"].size for b in batches)
    assert used > 0.6


def test_same_seed_same_batches(make_cfg, tokenizer, workdir):
    def first(seed, pack, n=6):
        cfg = make_cfg(shuffle_seed=seed, pack=pack)
        it = make_train_iterator(cfg, tokenizer, workdir, process_index=0, process_count=1)
        return [next(it) for _ in range(n)]

    for pack in (False, True):
        a, b, c = first(1, pack), first(1, pack), first(2, pack)
        for x, y in zip(a, b, strict=True):
            assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        assert any(
            x["src"].shape != z["src"].shape or not np.array_equal(x["src"], z["src"])
            for x, z in zip(a, c, strict=True)
        )


@pytest.mark.parametrize("pack", [False, True])
def test_host_shards_are_disjoint_and_complete(make_cfg, tokenizer, workdir, pack):
    cfg = make_cfg(pack=pack)
    everything = collections.Counter(dataset_pairs(cfg, tokenizer, workdir))
    iterators = [
        make_train_iterator(cfg, tokenizer, workdir, process_index=i, process_count=2)
        for i in range(2)
    ]
    if not pack:
        # Agree on batches per bucket, as the all-gather does across real JAX processes.
        agreed = tuple(np.max([it.batches_per_bucket for it in iterators], axis=0).tolist())
        iterators = [
            make_train_iterator(
                cfg, tokenizer, workdir, process_index=i, process_count=2, batches_per_bucket=agreed
            )
            for i in range(2)
        ]
        assert iterators[0].rows == (64, 32, 20, 16)  # Half of the global rows each.
    epochs = [epoch_of(it) for it in iterators]
    read = packed_pairs if pack else unpacked_pairs
    shards = [collections.Counter(read(batches)) for batches in epochs]
    assert not set(shards[0]) & set(shards[1])
    assert shards[0] + shards[1] == everything
    if not pack:  # Every step, both hosts yield the same shape.
        assert [b["src"].shape for b in epochs[0]] == [b["src"].shape for b in epochs[1]]


@pytest.mark.parametrize("pack", [False, True])
def test_restored_state_reproduces_the_next_batches(make_cfg, tokenizer, workdir, pack):
    cfg = make_cfg(pack=pack)
    it = make_train_iterator(cfg, tokenizer, workdir, process_index=0, process_count=1)
    n = it.batches_in_epoch
    for _ in range(n - 2):
        next(it)
    state = json.loads(json.dumps(it.get_state()))  # As Orbax JsonSave would store it.
    expected = [next(it) for _ in range(5)]  # Crosses into epoch 1.
    assert it.epoch == 1
    restored = make_train_iterator(cfg, tokenizer, workdir, process_index=0, process_count=1)
    restored.set_state(state)
    for want in expected:
        got = next(restored)
        assert all(np.array_equal(got[k], want[k]) for k in want)
    assert restored.get_state() == it.get_state()


def test_state_from_another_config_is_refused(make_cfg, tokenizer, workdir):
    it = make_train_iterator(make_cfg(), tokenizer, workdir, process_index=0, process_count=1)
    other = make_train_iterator(
        make_cfg(shuffle_seed=5), tokenizer, workdir, process_index=0, process_count=1
    )
    with pytest.raises(ValueError, match="fingerprint .* saved over other training data"):
        other.set_state(it.get_state())
    with pytest.raises(ValueError, match="lacks epoch/batch_in_epoch/fingerprint"):
        it.set_state({"next_index": 3})
    state = it.get_state()
    with pytest.raises(ValueError, match="batch_in_epoch=10000, but epoch 0 has only"):
        it.set_state({**state, "batch_in_epoch": 10_000})
    with pytest.raises(ValueError, match="epoch=-1, batch_in_epoch=0: not a position"):
        it.set_state({**state, "epoch": -1})
    retokenized = make_train_iterator(
        make_cfg(),
        train_tokenizer([s for p in get_pairs(make_cfg(), "test") for s in p], vocab_size=150),
        workdir,
        process_index=0,
        process_count=1,
    )
    with pytest.raises(ValueError, match="fingerprint"):  # Same config, other tokenizer.
        retokenized.set_state(state)


def test_long_pairs_are_dropped_and_counted(make_cfg, tokenizer, workdir):
    cfg = make_cfg(max_len=16, tokens_per_batch=512)
    tokens, _ = tokenized_split(cfg, tokenizer, "train", workdir, 0, 1)
    too_long = int(np.sum(np.maximum(tokens.src_lengths, tokens.tgt_lengths) + 1 > 16))
    assert too_long > 0
    it = make_train_iterator(cfg, tokenizer, workdir, process_index=0, process_count=1)
    assert it.num_dropped == too_long and it.num_pairs == len(tokens) - too_long
    assert max(next(it)["src"].shape[1] for _ in range(5)) <= 16


@pytest.mark.slow
def test_worker_processes_give_the_same_batches_and_state(make_cfg, tokenizer, workdir):
    threads = make_train_iterator(
        make_cfg(pack=True), tokenizer, workdir, process_index=0, process_count=1
    )
    workers = make_train_iterator(
        make_cfg(pack=True, num_workers=1), tokenizer, workdir, process_index=0, process_count=1
    )
    for _ in range(3):
        a, b = next(threads), next(workers)
        assert all(np.array_equal(a[k], b[k]) for k in a)
    threads.set_state(workers.get_state())  # The state does not depend on num_workers.
    a, b = next(threads), next(workers)
    assert all(np.array_equal(a[k], b[k]) for k in a)
