"""SentencePiece: fixed special ids, exact round trips, unk, save/load, train-or-load."""

import json

import numpy as np
import pytest

from transformer_jax.data.tokenizer import UNK_ID, Tokenizer, train_tokenizer
from transformer_jax.data.translation import get_pairs, load_tokenizer_or_train

ACCENTED = [
    "Élève à Noël, ça coûte 5 €.",
    "  deux  espaces  et une fin ",
    "Grüße aus Köln – naïve",
    "¿Qué tal? Très bien.",
    "Straße, Öl, Ärger",
    "œuvre, cœur, déjà vu",
] * 20


def test_special_ids(tokenizer):
    assert (tokenizer.pad_id, tokenizer.eos_id, tokenizer.bos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    assert [tokenizer.id_to_piece(i) for i in range(4)] == ["<pad>", "</s>", "<s>", "<unk>"]
    assert 40 < tokenizer.vocab_size <= 200


@pytest.mark.parametrize("lang", ["fr", "de"])
def test_exact_round_trip_on_the_embedded_corpus(make_cfg, lang, tmp_path):
    cfg = make_cfg(embedded_target_lang=lang)
    tokenizer = load_tokenizer_or_train(cfg, tmp_path)
    pairs = get_pairs(cfg, "train") + get_pairs(cfg, "test")
    texts = [t for pair in pairs for t in pair]
    ids = tokenizer.encode_batch(texts)
    assert ids[0] == tokenizer.encode(texts[0])
    assert all(3 not in row and 1 not in row for row in ids)  # No unk, no eos added.
    assert [tokenizer.decode(row) for row in ids] == texts


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_exact_round_trip_on_accented_text_and_unk(model_type):
    tokenizer = train_tokenizer(ACCENTED, vocab_size=80, model_type=model_type)
    for text in ACCENTED:
        assert tokenizer.decode(tokenizer.encode(text)) == text
    ids = tokenizer.encode("Köln 日本")
    assert ids.count(UNK_ID) == 1 and tokenizer.decode(ids).startswith("Köln ")


def test_decode_stops_at_eos_and_skips_pad_and_bos(tokenizer):
    ids = tokenizer.encode("vingt et un")
    row = np.array([2, *ids, 0, 0, 1, *tokenizer.encode("deux"), 0], np.int32)
    assert tokenizer.decode(row) == "vingt et un"
    assert tokenizer.decode([]) == ""


def test_save_and_load(tokenizer, tmp_path):
    tokenizer.save(tmp_path / "sub" / "t.model")
    loaded = Tokenizer.load(tmp_path / "sub" / "t.model")
    assert loaded.model_proto == tokenizer.model_proto
    assert loaded.encode("quatre-vingts") == tokenizer.encode("quatre-vingts")
    with pytest.raises(FileNotFoundError, match="missing.model: no SentencePiece model"):
        Tokenizer.load(tmp_path / "missing.model")


def test_training_is_deterministic():
    a = train_tokenizer(ACCENTED, vocab_size=70)
    b = train_tokenizer(ACCENTED, vocab_size=70)
    assert a.model_proto == b.model_proto


def test_load_or_train(make_cfg, tmp_path, tokenizer):
    cfg = make_cfg()
    trained = load_tokenizer_or_train(cfg, tmp_path)
    assert (tmp_path / "tokenizer.model").exists()
    assert json.loads((tmp_path / "tokenizer.json").read_text())["vocab_size"] == 200
    assert trained.model_proto == tokenizer.model_proto  # Same corpus, same model.
    assert load_tokenizer_or_train(cfg, tmp_path).model_proto == trained.model_proto
    cfg.vocab_size = 150
    with pytest.raises(
        ValueError,
        match=r"tokenizer.model was trained with \{'vocab_size': 200\}"
        r", but the config now says \{'vocab_size': 150\}",
    ):
        load_tokenizer_or_train(cfg, tmp_path)
    cfg.spm_model_path = str(tmp_path / "tokenizer.model")  # An explicit model wins.
    assert load_tokenizer_or_train(cfg, tmp_path).model_proto == trained.model_proto


def test_foreign_special_ids_are_rejected(tmp_path):
    import io

    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(ACCENTED),
        model_writer=buffer,
        vocab_size=60,
        hard_vocab_limit=False,
        minloglevel=2,
    )
    (tmp_path / "default_ids.model").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="default_ids.model: SentencePiece model has special ids"):
        Tokenizer.load(tmp_path / "default_ids.model")


def test_a_translation_run_keeps_its_external_tokenizer(make_cfg, tmp_path):
    """data.spm_model_path is copied into the workdir at the first start, so the run serves
    with its own copy; a resume whose file now holds another model is refused."""
    external = tmp_path / "shared" / "spm.model"
    external.parent.mkdir()
    cfg = make_cfg()
    first = load_tokenizer_or_train(cfg, tmp_path / "trained")
    external.write_bytes(first.model_proto)
    cfg.spm_model_path = str(external)
    run = tmp_path / "run"
    assert load_tokenizer_or_train(cfg, run).model_proto == first.model_proto
    assert (run / "tokenizer.model").read_bytes() == first.model_proto
    assert load_tokenizer_or_train(cfg, run).model_proto == first.model_proto  # a resume
    external.write_bytes(train_tokenizer(ACCENTED, vocab_size=70).model_proto)  # another model
    with pytest.raises(ValueError, match="is not the tokenizer .*tokenizer.model was started"):
        load_tokenizer_or_train(cfg, run)
    assert (run / "tokenizer.model").read_bytes() == first.model_proto  # the copy stays
