"""Documents -> packed rows: nothing dropped or repeated, documents kept apart, bytes counted
exactly, resumable epochs (bits per byte: tests/tasks/test_language_model_loss.py)."""

import numpy as np
import pytest

from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.data.lm import rows
from transformer_jax.data.lm.pipeline import LMTrainIterator
from transformer_jax.tokens import BOS_ID, EOS_ID

TEXTS = ["hello world", "x" * 600, "abc\ndéf", "é", "a b c d e f g"]


def _docs(texts=TEXTS):
    return rows.tokenize_documents(ByteTokenizer(), texts)


def test_documents_are_bos_tokens_eos_with_their_bytes():
    docs = _docs()
    first = docs.ids[docs.offsets[0] : docs.offsets[1]]
    assert first[0] == BOS_ID and first[-1] == EOS_ID
    assert ByteTokenizer().decode(first) == "hello world"
    assert docs.num_bytes.tolist() == [len(t.encode()) + 1 for t in TEXTS]
    assert docs.num_predictions == sum(len(t.encode()) + 1 for t in TEXTS)


class _Gpt2Like:
    """GPT-2's shape of vocabulary: one special token (9) is bos and eos, and id 0 ("!") is an
    ordinary token, the project's padding id."""

    bos_id = eos_id = 9
    ids = {"!": 0, "h": 5, "i": 6, "o": 7, "k": 8}

    def encode_batch(self, texts):
        return [[self.ids[c] for c in t] for t in texts]


def test_the_tokenizers_own_bos_and_eos_frame_documents_and_token_zero_is_predicted():
    texts = ["hi!!", "!", "ok"]
    docs = rows.tokenize_documents(_Gpt2Like(), texts)
    assert docs.ids.tolist() == [9, 5, 6, 0, 0, 9, 9, 0, 9, 9, 7, 8, 9]
    chunks = rows.chunk_documents(docs, 8)
    (batch,) = rows.PackedEpoch(docs, chunks, np.arange(len(chunks)), 8, 2)
    real = batch["weights"] == 1
    assert real.sum() == docs.num_predictions == 10
    assert ((batch["targets"] == 0) & real).sum() == 3  # every "!", though its id is padding's
    assert (real == (batch["segment_ids"] > 0)).all()  # weights follow lengths, not ids


def test_long_documents_are_cut_into_chunks_never_dropped():
    chunks = rows.chunk_documents(_docs(), max_len=256)
    assert chunks.lengths.tolist() == [12, 256, 256, 89, 9, 3, 14]
    assert chunks.num_bytes.tolist() == [12, 0, 0, 601, 9, 3, 14]  # on each document's end
    assert chunks.lengths.sum() == _docs().num_predictions


def test_best_fit_packing_places_every_item_without_overlap():
    lengths = np.random.default_rng(0).integers(1, 65, 3000)
    row, col, num_rows = rows.pack(lengths, 64)
    used = np.zeros((num_rows, 64), int)
    for r, c, n in zip(row, col, lengths, strict=True):
        used[r, c : c + n] += 1
    assert used.max() == 1 and used.sum() == lengths.sum()
    assert lengths.sum() / (num_rows * 64) > 0.97


@pytest.mark.parametrize("hosts", [1, 2])
def test_an_epoch_covers_every_prediction_once_with_documents_apart(hosts):
    docs = _docs()
    chunks = rows.chunk_documents(docs, 16)
    order = np.random.default_rng(1).permutation(len(chunks))
    epochs = [rows.PackedEpoch(docs, chunks, order, 16, 8, p, hosts) for p in range(hosts)]
    batches = [
        {k: np.concatenate([e[i][k] for e in epochs]) for k in rows.BATCH_KEYS}
        for i in range(len(epochs[0]))
    ]
    if hosts == 2:
        single = rows.PackedEpoch(docs, chunks, order, 16, 8)
        for i, batch in enumerate(batches):
            for k in rows.BATCH_KEYS:
                np.testing.assert_array_equal(batch[k], single[i][k])
    seen = []
    total_bytes = 0.0
    for batch in batches:
        total_bytes += batch["bytes"].sum()
        for r in range(batch["inputs"].shape[0]):
            segments = batch["segment_ids"][r]
            real = segments > 0
            np.testing.assert_array_equal(real, batch["weights"][r] > 0)
            for s in np.unique(segments[real]):
                cols = np.flatnonzero(segments == s)
                assert (np.diff(cols) == 1).all()  # contiguous
                np.testing.assert_array_equal(batch["positions"][r, cols], np.arange(len(cols)))
                # Inputs are targets shifted by one inside the segment.
                np.testing.assert_array_equal(
                    batch["inputs"][r, cols[1:]], batch["targets"][r, cols[:-1]]
                )
                seen.append(tuple(batch["targets"][r, cols]))
    assert total_bytes == docs.num_bytes.sum()
    expected = [
        tuple(docs.ids[s + 1 : s + 1 + n])
        for s, n in zip(chunks.starts, chunks.lengths, strict=True)
    ]
    assert sorted(seen) == sorted(expected)


def test_train_iterator_resumes_exactly_and_reshuffles_each_epoch():
    docs = _docs(TEXTS * 8)
    make = lambda: LMTrainIterator(docs, max_len=32, rows_per_batch=8, seed=3)  # noqa: E731
    it = make()
    first_epoch = it.batches_in_epoch
    taken = [next(it) for _ in range(first_epoch + 2)]
    state_it = make()
    for _ in range(3):
        next(state_it)
    resumed = make()
    resumed.set_state(state_it.get_state())
    for expected in taken[3:]:
        got = next(resumed)
        for k in rows.BATCH_KEYS:
            np.testing.assert_array_equal(got[k], expected[k])
    assert not np.array_equal(taken[0]["targets"], taken[first_epoch]["targets"])
    other = LMTrainIterator(docs, max_len=32, rows_per_batch=8, seed=4)
    with pytest.raises(ValueError, match="fingerprint"):
        other.set_state(it.get_state())
