"""BERT pretraining batches: layout, masked positions, NSP balance, per-epoch masks drawn from
the seed, exact resumption, host slicing, fixed evaluation batches, and the tokenizer's
special pieces (issue 11)."""

import numpy as np
import pytest

from transformer_jax.data.bert import config as bert_config
from transformer_jax.data.bert import numbers_mix, pipeline
from transformer_jax.data.bert.masking import gather_selected
from transformer_jax.data.bert.pairs import make_pairs
from transformer_jax.data.lm.pipeline import load_lm_tokenizer
from transformer_jax.tokens import CLS_ID, FIRST_REGULAR_ID, PAD_ID, SEP_ID

V = 211


def _documents(count=60, seed=0):
    rng = np.random.default_rng(seed)
    return [
        [rng.integers(FIRST_REGULAR_ID, V, rng.integers(3, 14)).tolist()
         for _ in range(rng.integers(2, 9))]
        for _ in range(count)
    ]  # fmt: skip


def _cfg(**overrides):
    cfg = bert_config.default_bert_data_config()
    cfg.max_len, cfg.tokens_per_batch, cfg.batch_multiple = 32, 32 * 8, 4
    cfg.update(overrides)
    return cfg


def test_gather_selected_left_aligns_each_rows_selected_positions():
    targets = np.arange(2 * 7).reshape(2, 7)
    weights = np.array([[0, 1, 0, 0, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0]], np.float32)
    positions, picked, used = gather_selected(targets, weights, 4)
    np.testing.assert_array_equal(positions, [[1, 4, 5, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(picked, [[1, 4, 5, 0], [0, 0, 0, 0]])
    np.testing.assert_array_equal(used, [[1, 1, 1, 0], [0, 0, 0, 0]])
    with pytest.raises(ValueError, match="max_predictions=2"):
        gather_selected(targets, weights, 2)


def test_batches_layout_masks_and_labels():
    cfg = _cfg()
    it = pipeline.BertTrainIterator(_documents(), cfg, V)
    p = bert_config.max_predictions(cfg)
    labels = []
    for _ in range(it.batches_in_epoch):
        b = next(it)
        assert b["inputs"].shape == b["segment_ids"].shape == (8, 32)
        assert b["mlm_positions"].shape == b["mlm_weights"].shape == (8, p)
        assert (b["inputs"][:, 0] == CLS_ID).all()
        for r in range(8):
            tokens, segments = b["inputs"][r], b["segment_ids"][r]
            n = int((tokens != PAD_ID).sum())
            seps = np.flatnonzero(tokens == SEP_ID)
            assert len(seps) == 2 and seps[1] == n - 1  # [CLS] A [SEP] B [SEP]
            np.testing.assert_array_equal(segments[: seps[0] + 1], 0)
            np.testing.assert_array_equal(segments[seps[0] + 1 : n], 1)
            np.testing.assert_array_equal(segments[n:], 0)
            used = b["mlm_weights"][r] > 0
            positions = b["mlm_positions"][r][used]
            ordinary = np.flatnonzero((tokens != PAD_ID) & (tokens != CLS_ID) & (tokens != SEP_ID))
            assert set(positions) <= set(ordinary)  # never a special or padding position
            assert used.sum() == max(1, round(0.15 * (n - 3)))
            assert (b["mlm_targets"][r][used] >= FIRST_REGULAR_ID).all()
        np.testing.assert_array_equal(b["nsp_weights"], 1.0)
        labels += b["nsp_labels"].tolist()
    assert 0.35 < np.mean(labels) < 0.65  # about half NotNext


def test_masks_and_pairs_change_each_epoch_and_come_back_with_the_seed():
    docs = _documents()
    a, b = pipeline.BertTrainIterator(docs, _cfg(), V), pipeline.BertTrainIterator(docs, _cfg(), V)
    first = [next(a) for _ in range(a.batches_in_epoch)]
    second = next(a)
    assert not np.array_equal(first[0]["inputs"], second["inputs"])
    for batch in first:
        again = next(b)
        for key in batch:
            np.testing.assert_array_equal(batch[key], again[key])
    other = pipeline.BertTrainIterator(docs, _cfg(shuffle_seed=5), V)
    assert not np.array_equal(next(other)["inputs"], first[0]["inputs"])


def test_resumes_exactly_and_hosts_split_the_global_batch():
    docs = _documents()
    it = pipeline.BertTrainIterator(docs, _cfg(), V)
    for _ in range(it.batches_in_epoch + 2):  # into the second epoch
        next(it)
    state = it.get_state()
    expected = [next(it) for _ in range(3)]
    resumed = pipeline.BertTrainIterator(docs, _cfg(), V)
    resumed.set_state(state)
    hosts = [pipeline.BertTrainIterator(docs, _cfg(), V, process_index=i, process_count=2)
             for i in range(2)]  # fmt: skip
    for h in hosts:
        h.set_state({**state, "fingerprint": h.get_state()["fingerprint"]})
    for want in expected:
        got = next(resumed)
        parts = [next(h) for h in hosts]
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
            np.testing.assert_array_equal(np.concatenate([p[key] for p in parts]), want[key])
    with pytest.raises(ValueError, match="fingerprint"):
        pipeline.BertTrainIterator(docs, _cfg(mask_rate=0.2), V).set_state(state)


@pytest.fixture(scope="module")
def text_cfg(tmp_path_factory):
    root = tmp_path_factory.mktemp("bert_text")
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(300)] + ["alpha", "beta", "gamma", "delta"]

    def documents(n):
        return "\n\n".join(
            " ".join(
                " ".join(rng.choice(words, rng.integers(3, 9))).capitalize() + "."
                for _ in range(rng.integers(2, 6))
            )
            for _ in range(n)
        )

    for split, n in (("train", 200), ("eval", 23), ("test", 17)):
        (root / f"{split}.txt").write_text(documents(n))
    cfg = _cfg(source="text", vocab_size=400, eval_batch_size=8)
    for split in ("train", "eval", "test"):
        cfg[f"text_{split}"] = str(root / f"{split}.txt")
    bert_config.validate_bert_data_config(cfg)
    return cfg, root / "work"


def test_tokenizer_has_the_special_pieces_and_eval_batches_are_fixed(text_cfg):
    cfg, workdir = text_cfg
    tokenizer = pipeline.load_bert_tokenizer(cfg, workdir)
    assert [tokenizer.id_to_piece(i) for i in (4, 5, 6)] == ["[CLS]", "[SEP]", "[MASK]"]
    batches = pipeline.make_bert_eval_batches(cfg, tokenizer, "eval", workdir)
    again = pipeline.make_bert_eval_batches(cfg, tokenizer, "eval", workdir)
    for a, b in zip(batches, again, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    real = np.concatenate([b["nsp_weights"] for b in batches])
    assert real[-1] == 0 or len(real) % 8 == 0  # the last batch padded with empty rows
    assert (np.concatenate([b["inputs"] for b in batches])[real == 0] == PAD_ID).all()
    test = pipeline.make_bert_eval_batches(cfg, tokenizer, "test", workdir)
    assert test and not np.array_equal(test[0]["inputs"], batches[0]["inputs"])


def test_number_documents_are_added_to_the_training_split_only(text_cfg):
    cfg, workdir = text_cfg
    tokenizer = pipeline.load_bert_tokenizer(cfg, workdir)
    plain = {s: pipeline.sentence_documents(cfg, tokenizer, s, workdir) for s in ("train", "eval")}
    cfg = cfg.copy_and_resolve_references()
    cfg.mix_numbers = 10
    mixed = {s: pipeline.sentence_documents(cfg, tokenizer, s, workdir) for s in ("train", "eval")}
    assert mixed["eval"] == plain["eval"]
    assert mixed["train"][: len(plain["train"])] == plain["train"]
    added = mixed["train"][len(plain["train"]) :]
    words = [s for d in numbers_mix.number_documents(10, seed=0, lang="fr") for s in d]
    assert [tokenizer.decode(s) for d in added for s in d] == words


def test_number_negatives_come_from_other_number_documents(text_cfg):
    cfg, workdir = text_cfg
    cfg = cfg.copy_and_resolve_references()
    cfg.mix_numbers, cfg.mix_numbers_negatives = 40, "numbers"
    tokenizer = pipeline.load_bert_tokenizer(cfg, workdir)
    documents = pipeline.sentence_documents(cfg, tokenizer, "train", workdir)
    negatives = pipeline.negative_groups(cfg, documents)
    first = len(documents) - 40  # the number documents close the split
    assert negatives["groups"] == [0] * first + [1] * 40
    pairs = make_pairs(documents, np.random.default_rng(0), max_len=cfg.max_len, **negatives)
    number_not_next = [p for p in pairs if p.source[0] >= first and not p.is_next]
    assert number_not_next and all(p.source[3] >= first for p in number_not_next)
    assert all(p.source[4:] == (1, 2) for p in number_not_next)  # B: another number's French
    assert all(p.source[3] < first for p in pairs if p.source[0] < first and not p.is_next)
    cfg.mix_numbers_negatives = "any"  # BERT's: no groups, the stream of earlier runs
    assert pipeline.negative_groups(cfg, documents) == {}


def test_similar_negatives_come_from_each_numbers_nearest(text_cfg):
    cfg, workdir = text_cfg
    cfg = cfg.copy_and_resolve_references()
    cfg.mix_numbers, cfg.mix_numbers_negatives, cfg.mix_numbers_neighbours = 40, "similar", 3
    tokenizer = pipeline.load_bert_tokenizer(cfg, workdir)
    documents = pipeline.sentence_documents(cfg, tokenizer, "train", workdir)
    negatives = pipeline.negative_groups(cfg, documents)
    first = len(documents) - 40
    partners = negatives["partners"]
    assert sorted(partners) == list(range(first, len(documents)))
    assert all(len(set(v)) == 3 and min(v) >= first and d not in v for d, v in partners.items())
    pairs = make_pairs(documents, np.random.default_rng(0), max_len=cfg.max_len, **negatives)
    number_not_next = [p for p in pairs if p.source[0] >= first and not p.is_next]
    assert number_not_next
    assert all(
        p.source[3] in partners[p.source[0]] and p.source[4:] == (1, 2) for p in number_not_next
    )


def test_whole_word_mask_masks_every_piece_of_a_chosen_word(text_cfg):
    cfg, workdir = text_cfg
    cfg = cfg.copy_and_resolve_references()
    cfg.whole_word_mask, cfg.mask_rate = True, 0.3
    tokenizer = pipeline.load_bert_tokenizer(cfg, workdir)
    starts = pipeline.word_starts(tokenizer)
    assert starts[tokenizer.encode("hello world")[0]]  # "▁hello" (or "▁") begins a word
    batch = pipeline.make_bert_train_iterator(cfg, tokenizer, workdir).epoch_batches(0)[0]
    tokens = batch["inputs"].copy()
    rows = np.arange(len(tokens))[:, None]
    tokens[rows, batch["mlm_positions"]] = np.where(
        batch["mlm_weights"] > 0, batch["mlm_targets"], tokens[rows, batch["mlm_positions"]]
    )
    selected = np.zeros(tokens.shape, bool)
    selected[rows, batch["mlm_positions"]] = batch["mlm_weights"] > 0
    assert selected.any()
    # A selected piece that continues a word has its word's previous piece selected too, and
    # the piece after a selected one is selected unless it begins a word or is special.
    regular = tokens >= FIRST_REGULAR_ID
    inside = regular[:, 1:] & regular[:, :-1] & ~starts[tokens[:, 1:]]
    assert (selected[:, 1:] == selected[:, :-1])[inside].all()
    # Built without the tokenizer's word starts, the option is refused, not ignored.
    documents = pipeline.sentence_documents(cfg, tokenizer, "train", workdir)
    with pytest.raises(ValueError, match="whole_word_mask needs"):
        pipeline.BertTrainIterator(documents, cfg, tokenizer.vocab_size)


def test_a_tokenizer_without_bert_pieces_is_refused(text_cfg, tmp_path):
    cfg, _ = text_cfg
    plain = load_lm_tokenizer(cfg, tmp_path)  # the GPT tokenizer: no [CLS] [SEP] [MASK]
    with pytest.raises(ValueError, match=r"id 4 must be the piece '\[CLS\]'"):
        pipeline.check_bert_tokenizer(plain, "tokenizer.model")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("tokenizer", "byte", "BERT needs"),
        ("mask_rate", 0.0, "mask_rate"),
        ("mask_rate", 1.5, "mask_rate"),
        ("short_seq_prob", -0.1, "short_seq_prob"),
        ("max_len", 5, "max_len"),
        ("mix_numbers", -1, "mix_numbers"),
        ("mix_numbers_lang", "es", "mix_numbers_lang"),
        ("mix_numbers_per_document", 0, "mix_numbers_per_document"),
        ("mix_numbers_negatives", "near", "mix_numbers_negatives"),
        ("mix_numbers_neighbours", 0, "mix_numbers_neighbours"),
    ],
)
def test_bad_fields_are_named(field, value, message):
    cfg = _cfg()
    cfg[field] = value
    with pytest.raises(ValueError, match=message):
        bert_config.validate_bert_data_config(cfg)


def test_mix_numbers_in_tokenizer_makes_number_words_pieces(text_cfg, tmp_path):
    cfg, _ = text_cfg
    plain = pipeline.load_bert_tokenizer(cfg, tmp_path / "plain")
    cfg = cfg.copy_and_resolve_references()
    cfg.mix_numbers, cfg.mix_numbers_in_tokenizer = 200, True
    mixed = pipeline.load_bert_tokenizer(cfg, tmp_path / "mixed")
    text = [s for d in numbers_mix.number_documents(200, seed=0, lang="fr") for s in d]
    pieces = {
        name: sum(len(t.encode(s)) for s in text)
        for name, t in (("plain", plain), ("mixed", mixed))
    }
    assert pieces["mixed"] < 0.6 * pieces["plain"], pieces
    assert pipeline.load_bert_tokenizer(cfg, tmp_path / "mixed").encode("cent") == mixed.encode(
        "cent"
    )  # read back, not retrained
    cfg.mix_numbers = 100  # other number documents: the saved tokenizer is refused
    with pytest.raises(ValueError, match="extra_documents"):
        pipeline.load_bert_tokenizer(cfg, tmp_path / "mixed")
    with pytest.raises(ValueError, match="come together"):  # undescribed extra documents
        load_lm_tokenizer(cfg, tmp_path / "undescribed", extra_documents=["quatre"])


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"mix_numbers": 0}, "no number documents"),
        ({"mix_numbers": 10, "spm_model_path": True}, "is a trained tokenizer"),
    ],
)
def test_mix_numbers_in_tokenizer_needs_numbers_and_a_new_tokenizer(overrides, message, tmp_path):
    if overrides.get("spm_model_path"):
        (tmp_path / "tok.model").write_bytes(b"")
        overrides = {**overrides, "spm_model_path": str(tmp_path / "tok.model")}
    cfg = _cfg(mix_numbers_in_tokenizer=True, **overrides)
    with pytest.raises(ValueError, match=f"'mix_numbers_in_tokenizer': True.*{message}"):
        bert_config.validate_bert_data_config(cfg)
