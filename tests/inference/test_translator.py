"""Translator on a tiny trained run: loading, averaging, order, greedy, bad inputs, attention."""

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from tests.conftest import TINY_STEPS
from transformer_jax.data.tokenizer import UNK_ID
from transformer_jax.data.translation import get_pairs
from transformer_jax.inference import decoding
from transformer_jax.inference.attention_plot import plot_attention
from transformer_jax.inference.decoding import greedy_decode
from transformer_jax.inference.translator import Translator
from transformer_jax.runs.layout import CheckpointError


@pytest.fixture(scope="module")
def translator(tiny_workdir):
    return Translator.from_checkpoint(tiny_workdir)


def _untrained_params(path, x, rng):
    """Weights as an untrained model has them: normal draws, LayerNorm scale 1, biases 0."""
    name = str(path[-2].key)  # the parameter's attribute name: "w1", "scale", "query_bias"...
    if name == "scale":
        return np.ones(x.shape, x.dtype)
    if name in ("bias", "b1", "b2") or name.endswith("_bias"):
        return np.zeros(x.shape, x.dtype)
    return rng.normal(0.0, 0.2, x.shape).astype(x.dtype)


@pytest.fixture(scope="module")
def random_translator(translator):
    """The run's tokenizer with untrained weights (drawn in numpy: eager init takes seconds).

    The tiny run is too short to learn anything (it emits the same string for every input); an
    untrained model's outputs differ from one input to the next, so order mix-ups would show.
    """
    graphdef, params = nnx.split(translator.model)
    rng = np.random.default_rng(2)
    drawn = jax.tree_util.tree_map_with_path(lambda p, x: _untrained_params(p, x, rng), params)
    # Placed like the loaded parameters, so both models share compiled programs.
    placed = jax.tree.map(lambda x, old: jax.device_put(x, old.sharding), drawn, params)
    return Translator(nnx.merge(graphdef, placed), translator.tokenizer)


@pytest.fixture(scope="module")
def sources(translator):
    """Test-split sentences of varied lengths (1 to 2 length buckets), not sorted."""
    pairs = get_pairs(translator.config.data, "test")
    return [src for src, _ in pairs[:13]]


def _leaves(t: Translator) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(t.model, nnx.Param))]


# ------------------------------------------------------------------------------ loading
def test_loads_latest_step_replicated_on_all_devices(translator):
    assert translator.steps == (TINY_STEPS[-1],)
    for leaf in jax.tree.leaves(nnx.state(translator.model, nnx.Param)):
        assert leaf.sharding.is_fully_replicated
        assert len(leaf.sharding.device_set) == jax.device_count() == 8


def test_average_equals_manual_mean_of_last_steps(tiny_workdir):
    averaged = Translator.from_checkpoint(tiny_workdir, average_last=3)
    assert averaged.steps == TINY_STEPS
    singles = [_leaves(Translator.from_checkpoint(tiny_workdir, step=s)) for s in TINY_STEPS]
    for i, leaf in enumerate(_leaves(averaged)):
        np.testing.assert_allclose(leaf, np.mean([s[i] for s in singles], axis=0), rtol=1e-6)
    # The checkpoints differ, so the mean is not just one of them.
    assert any(not np.allclose(a, b) for a, b in zip(_leaves(averaged), singles[-1], strict=True))

    pair = Translator.from_checkpoint(tiny_workdir, step=20, average_last=2)
    assert pair.steps == (10, 20)
    for i, leaf in enumerate(_leaves(pair)):
        np.testing.assert_allclose(leaf, (singles[0][i] + singles[1][i]) / 2, rtol=1e-6)


# ------------------------------------------------------------------------------ translate
def test_translate_returns_input_order(translator, sources, monkeypatch):
    """With a decoder that echoes its source, translate must return exactly its inputs."""

    def echo(src, beam_size, alpha, max_len):
        assert src.shape[0] % 8 == 0 and src.shape[1] % 16 == 0  # few, device-divisible shapes
        return np.asarray(src)

    monkeypatch.setattr(translator, "_decode_batch", echo)
    texts = ["", *sources[:5], "", *sources[5:], " "]
    for batch_size in (1, 3, 64):
        expected = [t if t.strip() else "" for t in texts]
        assert translator.translate(texts, batch_size=batch_size) == expected


def test_translate_equals_translating_each_alone(random_translator, sources):
    texts = sources + [""]
    together = random_translator.translate(texts, beam_size=1, batch_size=5)
    alone = [random_translator.translate([t], beam_size=1)[0] for t in texts]
    assert together == alone
    assert len(set(together)) >= 5  # the outputs differ, so a mix-up would show
    assert together[-1] == ""


def test_beam_search_keeps_input_order(random_translator, sources):
    texts = sources[:6]
    together = random_translator.translate(texts, beam_size=2, batch_size=4)
    alone = [random_translator.translate([t], beam_size=2)[0] for t in texts]
    assert together == alone


def test_beam_size_one_equals_greedy(random_translator, sources):
    """translate(beam_size=1) = greedy decoding of one plain batch (unsorted, unsharded).

    (That a beam of 1 equals greedy search is tested in test_decoding.py.)
    """
    t = random_translator
    rows = [t.tokenizer.encode(s) + [t.tokenizer.eos_id] for s in sources]
    src = np.zeros((len(rows), max(map(len, rows))), np.int32)
    for i, ids in enumerate(rows):
        src[i, : len(ids)] = ids
    tokens, _ = greedy_decode(t.model, jnp.asarray(src), max_len=t.model.cfg.max_len)
    expected = [t.tokenizer.decode(row) for row in np.asarray(tokens)]
    assert t.translate(sources, beam_size=1, batch_size=8) == expected


def test_batches_of_one_bucket_share_one_compiled_search(random_translator):
    """Sources are padded to 16-token buckets and batches to a few row counts (a multiple of
    the devices): new sentences, lengths and batch sizes inside a bucket compile nothing.
    (Beam size 7, which no other test uses: the programs counted are this test's own.)"""
    t = random_translator
    t.translate(["ab", "abc d"], beam_size=7)
    t.translate(["abc"], beam_size=1)
    compiled = decoding._beam_compiled._cache_size(), decoding._sample_compiled._cache_size()
    t.translate(["a b c d e f", "b", "c d e"], beam_size=7)  # Other lengths, same bucket.
    t.translate(["dcba", "ba"], beam_size=1)
    t.translate(["b a"], beam_size=7, alpha=0.9)  # alpha is traced, not compiled in.
    assert (decoding._beam_compiled._cache_size(), decoding._sample_compiled._cache_size()) == (
        compiled
    )
    t.translate(["ab " * 12], beam_size=7)  # A longer bucket: one new program.
    assert decoding._beam_compiled._cache_size() == compiled[0] + 1


def test_blank_lines_are_not_decoded(translator, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("a blank input was decoded")

    monkeypatch.setattr(translator, "_decode_batch", fail)
    assert translator.translate(["", "   ", "\t"]) == ["", "", ""]
    assert translator.translate([]) == []


def test_long_input_is_truncated_with_a_warning(random_translator):
    long = " ".join(["seven hundred and seventy-seven thousand"] * 20)
    assert len(random_translator.tokenizer.encode(long)) > random_translator.model.cfg.max_len
    with pytest.warns(UserWarning, match=r"longer than the model's max_len=32 .* truncated"):
        (out,) = random_translator.translate([long], beam_size=1)
    assert isinstance(out, str)


def test_unknown_characters_become_unk(random_translator):
    text = "日本 nine ☃"
    assert UNK_ID in random_translator.tokenizer.encode(text)
    (out,) = random_translator.translate([text], beam_size=1)
    assert isinstance(out, str)


def test_bad_arguments(translator):
    with pytest.raises(ValueError, match="beam_size"):
        translator.translate(["nine"], beam_size=0)
    with pytest.raises(TypeError, match="sequence of strings"):
        translator.translate("nine")


# ------------------------------------------------------------------------------ attention
def test_attention_shapes_match_tokens_and_plot(translator, tmp_path):
    tok, cfg = translator.tokenizer, translator.model.cfg
    source, target = "three hundred and four", "trois cent quatre"
    result = translator.attention(source, target)
    s, t = len(tok.encode(source)) + 1, len(tok.encode(target)) + 1
    assert len(result.source_tokens) == s and result.source_tokens[-1] == "</s>"
    assert len(result.target_tokens) == len(result.output_tokens) == t
    assert result.target_tokens[0] == "<s>" and result.output_tokens[-1] == "</s>"
    expected = {"encoder": (s, s), "decoder_self": (t, t), "decoder_cross": (t, s)}
    for kind, (q, k) in expected.items():
        layers = result.weights(kind)
        assert len(layers) == (
            cfg.num_encoder_layers if kind == "encoder" else cfg.num_decoder_layers
        )
        for w in layers:
            assert isinstance(w, np.ndarray) and w.shape == (cfg.num_heads, q, k)
            np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(result.decoder_self[0][0], k=1) == 0)  # causal

    path = plot_attention(result, "decoder_cross", 0, 3, tmp_path / "plots" / "cross.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="head=4 is out of range"):
        plot_attention(result, "encoder", 0, 4, tmp_path / "x.png")
    with pytest.raises(ValueError, match="not one of"):
        plot_attention(result, "cross", 0, 0, tmp_path / "x.png")


def test_attention_defaults_to_own_translation(translator):
    source = "nine"
    result = translator.attention(source)
    own = translator.translate([source], beam_size=1)[0]
    expected = len(translator.tokenizer.encode(own)[: translator.model.cfg.max_len - 1]) + 1
    assert len(result.target_tokens) == expected


# ------------------------------------------------------------------------------ bad workdirs
def _copy(workdir, tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(workdir, dst, ignore=shutil.ignore_patterns("cache", "tensorboard"))
    return dst


def _no_config(w):
    (w / "config.json").unlink()


def _bad_json(w):
    (w / "config.json").write_text("{not json")


def _no_tokenizer(w):
    (w / "tokenizer.model").unlink()


def _bad_tokenizer(w):
    (w / "tokenizer.model").write_bytes(b"this is not a sentencepiece model")


def _no_checkpoints(w):
    shutil.rmtree(w / "checkpoints")


def _empty_checkpoints(w):
    shutil.rmtree(w / "checkpoints")
    (w / "checkpoints").mkdir()


def _partial_step(w):
    shutil.rmtree(w / "checkpoints" / "30" / "state")


def _damaged_arrays(w):
    state = w / "checkpoints" / "30" / "state"
    for p in state.glob("**/d/*"):
        p.unlink()


def _other_shapes(w):
    model = json.loads((w / "model.json").read_text())  # model.json gives the model's shape
    model["d_ff"] = 48
    (w / "model.json").write_text(json.dumps(model))


def _bad_model_json(w):
    (w / "model.json").write_text("{ not json")


@pytest.mark.parametrize(
    "damage, kwargs, message",
    [
        (_no_config, {}, r"config\.json: config\.json is missing"),
        (_bad_json, {}, r"config\.json: config\.json is not readable JSON"),
        (_bad_model_json, {}, r"model\.json: model\.json is not readable JSON"),
        (_no_tokenizer, {}, r"tokenizer\.model: tokenizer\.model is missing"),
        (_bad_tokenizer, {}, r"tokenizer\.model: tokenizer\.model is not a usable SentencePiece"),
        (_no_checkpoints, {}, r"checkpoints: no checkpoints directory. Train first"),
        (_empty_checkpoints, {}, r"checkpoints: no checkpoints. Train first"),
        (None, {"step": 7}, r"checkpoints/7: step 7 does not exist; the saved steps are \[10"),
        (None, {"average_last": 4}, r"average_last=4 needs 4 checkpoints .* only \[10, 20, 30\]"),
        (_partial_step, {}, r"checkpoints/30/state: the checkpoint of step 30 has no `state`"),
        (
            _damaged_arrays,
            {},
            r"checkpoints/30/state: cannot read the (checkpoint's metadata|parameters).*damaged",
        ),
        (_other_shapes, {}, r"incompatible parameter shapes.*\n.*ffn/b1/value: checkpoint shape"),
    ],
)
def test_bad_workdir_raises_checkpoint_error(tiny_workdir, tmp_path, damage, kwargs, message):
    workdir = _copy(tiny_workdir, tmp_path)
    if damage is not None:
        damage(workdir)
    with pytest.raises(CheckpointError, match=message):
        Translator.from_checkpoint(workdir, **kwargs)


def test_missing_workdir(tmp_path):
    with pytest.raises(CheckpointError, match=r"nope: workdir does not exist"):
        Translator.from_checkpoint(tmp_path / "nope")
    assert issubclass(CheckpointError, ValueError)
