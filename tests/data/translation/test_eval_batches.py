"""Evaluation batches: fixed shapes, the same count on every host, every pair exactly once."""

import collections

import numpy as np
import pytest

from transformer_jax.data.translation import BATCH_KEYS, get_pairs, make_eval_batches


def real_rows(batches):
    return [
        (tuple(b["src"][r]), tuple(b["tgt_out"][r]))
        for b in batches
        for r in range(len(b["src"]))
        if b["weights"][r].any()
    ]


def test_eval_batches_cover_the_split_once(make_cfg, tokenizer):
    cfg = make_cfg()  # 150 eval pairs, 32 rows of max_len 32.
    batches = make_eval_batches(cfg, tokenizer, "eval", process_index=0, process_count=1)
    assert len(batches) == 5 and batches.num_pairs + batches.num_dropped == 150
    for batch in batches:
        assert set(batch) == set(BATCH_KEYS)
        assert {v.shape for v in batch.values()} == {(32, 32)}
        empty = ~batch["src"].any(axis=1)
        assert not batch["weights"][empty].any()  # Padding rows weigh nothing.
    assert len(real_rows(batches)) == batches.num_pairs
    decoded = [tokenizer.decode(src) for src, _ in real_rows(batches)]
    pairs = get_pairs(cfg, "eval")
    assert decoded == [s for s, _ in pairs][: len(decoded)]  # In split order.


def test_every_host_gets_the_same_number_of_batches(make_cfg, tokenizer):
    cfg = make_cfg(eval_batch_size=16, embedded_eval_size=101)
    whole = make_eval_batches(cfg, tokenizer, "eval", process_index=0, process_count=1)
    hosts = [
        make_eval_batches(cfg, tokenizer, "eval", process_index=i, process_count=4)
        for i in range(4)
    ]
    assert {len(h) for h in hosts} == {7}  # ceil(ceil(101 / 4) / (16 / 4)) batches of 4 rows.
    assert {b["src"].shape for h in hosts for b in h} == {(4, 32)}
    union = sum((collections.Counter(real_rows(h)) for h in hosts), collections.Counter())
    assert union == collections.Counter(real_rows(whole))


def test_long_eval_pairs_are_dropped_and_counted(make_cfg, tokenizer):
    cfg = make_cfg(max_len=12, tokens_per_batch=512)
    pairs = get_pairs(cfg, "eval")
    lengths = [max(len(tokenizer.encode(s)), len(tokenizer.encode(t))) + 1 for s, t in pairs]
    batches = make_eval_batches(cfg, tokenizer, "eval", process_index=0, process_count=1)
    assert batches.num_dropped == sum(n > 12 for n in lengths) > 0
    assert sum(int(b["weights"].any(axis=1).sum()) for b in batches) == batches.num_pairs
    assert np.all([b["src"].shape == (32, 12) for b in batches])


def test_eval_batch_size_must_split_over_hosts(make_cfg, tokenizer):
    cfg = make_cfg(eval_batch_size=40)
    with pytest.raises(ValueError, match="field 'eval_batch_size': 40 rows do not split evenly"):
        make_eval_batches(cfg, tokenizer, "eval", process_index=0, process_count=16)
