"""Sentence embeddings of a converted sentence-transformers folder equal what sentence-transformers
and transformers computed (tests/fixtures/hf/bert_sentence, made by make_sentence_fixture.py:
the tiny BertModel of bert_model/ with mean pooling, Normalize, inputs cut at 12 tokens)."""

import json
import pathlib
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from transformer_jax import interop
from transformer_jax.inference.embedder import Embedder
from transformer_jax.inference.pooling import (
    EmbeddingSettings,
    cls_pool,
    l2_normalise,
    mean_pool,
)
from transformer_jax.runs.layout import CheckpointError, Workdir

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"
TOLERANCE = 1e-5


def reference() -> tuple[dict, list[str]]:
    folder = FIXTURES / "bert_sentence"
    meta = json.loads((folder / "reference.json").read_text(encoding="utf-8"))
    return dict(np.load(folder / "reference.npz")), meta["texts"]


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    """The sentence-transformers folder, the plain BertModel and GPT-2, each converted once."""
    root = tmp_path_factory.mktemp("embed")
    for name in ("bert_sentence", "bert_model", "gpt2"):
        interop.from_hf(FIXTURES / name, root / name)
    return root


@pytest.fixture(scope="module")
def embedder(workdirs):
    return Embedder.from_checkpoint(workdirs / "bert_sentence")


def quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


# ------------------------------------------------------------------------ the pure functions
def test_pooling_functions_on_all_different_sizes():
    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((3, 5, 7)).astype(np.float32)
    real = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)
    mean = np.asarray(mean_pool(jnp.asarray(hidden), jnp.asarray(real)))
    for b in range(3):
        np.testing.assert_allclose(mean[b], hidden[b, real[b]].mean(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(cls_pool(jnp.asarray(hidden))), hidden[:, 0])
    unit = np.asarray(l2_normalise(jnp.asarray(mean)))
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1, rtol=1e-6)
    np.testing.assert_allclose(unit * np.linalg.norm(mean, axis=1, keepdims=True), mean, rtol=1e-5)
    assert np.all(np.asarray(l2_normalise(jnp.zeros((2, 7)))) == 0), "a zero vector stays zero"


# ------------------------------------------------------------------- against the references
def test_conversion_records_the_pooling_and_the_longest_input(workdirs):
    settings = EmbeddingSettings.read(Workdir.at(workdirs / "bert_sentence"))
    assert settings == EmbeddingSettings("mean", 12)
    assert EmbeddingSettings.read(Workdir.at(workdirs / "bert_model")) is None


def test_token_ids_and_hidden_states_equal_transformers(embedder):
    ref, texts = reference()
    hidden = quiet(embedder.token_embeddings, texts, batch_size=4)
    lengths = ref["attention_mask"].sum(axis=1)
    assert [len(h) for h in hidden] == lengths.tolist()
    assert max(lengths) == 12 and min(lengths) == 2, "the fixture cuts and has an empty text"
    specials = embedder.specials
    for i, ids in enumerate(embedder.run.tokenizer.encode_batch(texts)):
        assert [specials.cls, *ids[:10], specials.sep] == ref["input_ids"][i, : lengths[i]].tolist()
        assert np.abs(hidden[i] - ref["last_hidden_state"][i, : lengths[i]]).max() < TOLERANCE


def test_embeddings_equal_sentence_transformers(embedder):
    ref, texts = reference()
    vectors = quiet(embedder.embed, texts, batch_size=4)  # the second batch has padding rows
    assert vectors.shape == (len(texts), 12) and vectors.dtype == np.float32
    assert np.abs(vectors - ref["mean_embeddings"]).max() < TOLERANCE
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-6)


def test_cls_pooling_overrides_the_recorded_one(workdirs):
    ref, texts = reference()
    embedder = Embedder.from_checkpoint(workdirs / "bert_sentence", pooling="cls")
    expected = ref["cls_unnormalised"] / np.linalg.norm(ref["cls_unnormalised"], axis=1)[:, None]
    assert np.abs(quiet(embedder.embed, texts) - expected).max() < TOLERANCE


def test_a_plain_bert_pools_the_mean_over_all_its_positions(workdirs):
    """bert_model/ (no modules.json): mean pooling, 40 positions. Texts of at most 12 tokens
    embed as the sentence-transformers folder does; the 28-token one is not cut at 12."""
    ref, texts = reference()
    plain = Embedder.from_checkpoint(workdirs / "bert_model")
    assert (plain.pooling, plain.max_len) == ("mean", 40)
    vectors = plain.embed(texts)
    short = [0, 1, 3, 5]
    assert np.abs(vectors[short] - ref["mean_embeddings"][short]).max() < TOLERANCE
    assert np.abs(vectors[4] - ref["mean_embeddings"][4]).max() > 1e-3


# ------------------------------------------------------------------------------ properties
def test_batching_padding_and_a_mesh_change_nothing(workdirs, embedder):
    _, texts = reference()
    batched = quiet(embedder.embed, texts, batch_size=8)
    alone = np.stack([quiet(embedder.embed, t, batch_size=1) for t in texts])
    np.testing.assert_allclose(alone, batched, atol=1e-6)
    sharded = Embedder.from_checkpoint(workdirs / "bert_sentence", mesh={"fsdp": 2})
    np.testing.assert_allclose(quiet(sharded.embed, texts, batch_size=8), batched, atol=1e-6)


def test_rank_orders_texts_by_cosine_similarity(embedder):
    _, texts = reference()
    matches = quiet(embedder.rank, "The cat sat.", texts)
    scores = quiet(embedder.embed, texts) @ embedder.embed("The cat sat.")
    assert [m.index for m in matches] == np.argsort(-scores, kind="stable").tolist()
    np.testing.assert_allclose([m.score for m in matches], np.sort(scores)[::-1], atol=1e-6)
    assert [m.text for m in matches] == [texts[m.index] for m in matches]


def test_long_texts_are_cut_with_one_warning(embedder):
    _, texts = reference()
    with pytest.warns(UserWarning, match=r"2 of 6 texts \(the first: texts\[2\]\).*cut") as w:
        embedder.embed(texts)
    assert len(w) == 1
    assert embedder.embed([]).shape == (0, 12)


# ------------------------------------------------------------------------------ refusals
def test_a_gpt_workdir_is_refused_naming_its_model_and_task(workdirs):
    with pytest.raises(CheckpointError, match="'language_model' task with a 'decoder_only'"):
        Embedder.from_checkpoint(workdirs / "gpt2")


def test_an_unknown_pooling_is_refused_before_reading(tmp_path):
    with pytest.raises(ValueError, match="pooling 'max' is not one of mean, cls"):
        Embedder.from_checkpoint(tmp_path / "missing", pooling="max")


def test_a_damaged_embedding_json_is_named(workdirs, tmp_path):
    import shutil

    copy = pathlib.Path(shutil.copytree(workdirs / "bert_sentence", tmp_path / "copy"))
    (copy / "embedding.json").write_text('{"pooling": "max", "max_len": 12}')
    with pytest.raises(CheckpointError, match=r"embedding.json: unreadable .*'max'.*--pooling"):
        Embedder.from_checkpoint(copy)
    (copy / "embedding.json").write_text('{"pooling": "mean"}')
    with pytest.raises(CheckpointError, match="KeyError"):
        Embedder.from_checkpoint(copy)


def test_texts_must_be_strings(embedder):
    # The message is ours, or (in tests, which type-check every call) beartype's.
    with pytest.raises(TypeError, match=r"texts\[1\] is a int|'texts': \['fine', 3\]"):
        embedder.embed(["fine", 3])
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        embedder.embed(["fine"], batch_size=0)
