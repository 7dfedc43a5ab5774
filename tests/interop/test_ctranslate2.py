"""Translation models exported to CTranslate2 decode what the project decodes: tiny random models
(every field the mapping handles), a workdir trained here, the converted OPUS-MT fixture against
transformers' own outputs, and the convert command. Needs ctranslate2 (in the `test` extra)."""

import json
import pathlib
import shutil
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

ctranslate2 = pytest.importorskip("ctranslate2")

from transformer_jax import EncoderDecoder, interop  # noqa: E402
from transformer_jax.cli import convert as convert_cli  # noqa: E402
from transformer_jax.inference.decoding import beam_search, greedy_decode  # noqa: E402
from transformer_jax.inference.translator import Translator  # noqa: E402
from transformer_jax.interop import convert  # noqa: E402
from transformer_jax.interop import ctranslate2 as ct2  # noqa: E402
from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig  # noqa: E402
from transformer_jax.tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID  # noqa: E402

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"
# Different sizes everywhere (vocabulary, width, heads, layers per stack) so that a swapped or
# transposed axis cannot pass.
SHAPE = dict(vocab_size=53, d_model=24, num_heads=3, d_ff=40, num_encoder_layers=2,
             num_decoder_layers=3)  # fmt: skip
# Marian's (OPUS-MT) options: positions as sines then cosines, SiLU, a bias on the logits.
MARIAN = dict(positional="sinusoidal_halves", activation="silu", logits_bias=True,
              layer_norm_eps=1e-5)  # fmt: skip
FIELDS = {
    "post": dict(norm="post"),
    "pre_scanned": dict(norm="pre", scan_layers=True),  # Layers stacked: one scanned block.
    "marian": MARIAN,
    "marian_unscaled": dict(MARIAN, scale_embeddings=False),
    "learned_untied": dict(norm="pre", positional="learned", share_embeddings=False,
                           tie_output=False, use_bias=False, activation="gelu_tanh"),
}  # fmt: skip
BIASES = ("scale", "bias", "b1", "b2", "query_bias", "value_bias", "out_bias", "logits_bias")
SPECIAL = {PAD_ID: "<pad>", EOS_ID: "</s>", BOS_ID: "<s>", UNK_ID: "<unk>"}
LENGTH = 12  # Output tokens of the fixed-length runs.


def random_model(cfg: EncoderDecoderConfig, seed: int = 0, eos_bias: float = 0.0):
    """`cfg`'s model with its biases and LayerNorms perturbed (their initial zeros and ones would
    hide a mapping that drops or swaps them), and `eos_bias` added to the eos logit."""
    model = EncoderDecoder(cfg, rngs=nnx.Rngs(seed))
    rng = np.random.default_rng(seed)
    perturbed = []
    for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        value = np.asarray(var[...])
        if path[-1] in BIASES:
            value = value + 0.1 * rng.standard_normal(value.shape).astype(np.float32)
        if path[-1] == "logits_bias":
            value[EOS_ID] += eos_bias
        perturbed.append((path, var.replace(jnp.asarray(value, jnp.float32))))
    nnx.update(model, nnx.from_flat_state(perturbed))
    return model


def fixed_length(model, src, beam: int):
    """Our best `LENGTH` tokens `[B, LENGTH]` with eos an ordinary token, and their summed
    log-probs `[B]`."""
    if beam == 1:
        return greedy_decode(model, src, max_len=LENGTH, eos_id=None)
    tokens, scores = beam_search(model, src, beam_size=beam, alpha=0.0, max_len=LENGTH,
                                 eos_id=None)  # fmt: skip
    return tokens[:, 0], scores[:, 0]


def ct2_fixed_length(translator, pieces, beam: int):
    """CTranslate2's `LENGTH` tokens (strings), and their summed log-probs: its end token is our
    pad, which it never emits, and the minimum length keeps it from stopping earlier."""
    results = translator.translate_batch(
        pieces, beam_size=beam, max_decoding_length=LENGTH, min_decoding_length=LENGTH,
        end_token="<pad>", return_scores=True, length_penalty=0,
    )  # fmt: skip
    return [r.hypotheses[0] for r in results], np.array([r.scores[0] for r in results])


# ------------------------------------------------------------------------- the weight mapping
@pytest.mark.parametrize("fields", FIELDS.values(), ids=FIELDS)
def test_same_weights_same_outputs(tmp_path, fields):
    cfg = EncoderDecoderConfig(**SHAPE, dropout_rate=0.0, max_len=32, **fields)
    model = random_model(cfg)
    pieces = [SPECIAL.get(i, f"t{i}") for i in range(cfg.vocab_size)]
    tokens = ct2.special_tokens(pieces, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID)
    ct2.write_model(ct2.model_spec(model, pieces, tokens), tmp_path / "ct2")
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), intra_threads=1)
    ids = np.random.default_rng(1).integers(4, cfg.vocab_size, (5, 7))
    src = jnp.asarray(np.concatenate([ids, np.full((5, 1), EOS_ID)], axis=1), jnp.int32)
    for beam in (1, 4):
        want, logp = fixed_length(model, src, beam)
        got, ct2_logp = ct2_fixed_length(translator, [[pieces[i] for i in r] for r in ids], beam)
        assert [[pieces[i] for i in row] for row in np.asarray(want).tolist()] == got, beam
        # The log-prob depends on every logit of every step: a much finer check.
        np.testing.assert_allclose(np.asarray(logp), ct2_logp, atol=1e-4, err_msg=str(beam))


def test_every_parameter_is_mapped(monkeypatch):
    model = random_model(EncoderDecoderConfig(**SHAPE, dropout_rate=0.0, max_len=32))
    pieces = [SPECIAL.get(i, f"t{i}") for i in range(SHAPE["vocab_size"])]
    tokens = ct2.special_tokens(pieces, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID)
    spec = ct2.model_spec(model, pieces, tokens)
    assert spec.decoder.projection.bias[PAD_ID] == ct2.PAD_LOGIT_BIAS  # pad is never emitted
    spec.validate()  # Every CTranslate2 variable is set.
    weights = ct2._weights
    monkeypatch.setattr(ct2, "_weights", lambda m: {**weights(m), "decoder/extra": np.zeros(3)})
    with pytest.raises(interop.ConversionError, match="decoder/extra"):
        ct2.model_spec(model, pieces, tokens)


# ------------------------------------------------------------------------ workdirs
@pytest.fixture(scope="module")
def tiny_export(tiny_workdir, tmp_path_factory) -> tuple[pathlib.Path, ct2.Exported]:
    out = tmp_path_factory.mktemp("ct2") / "tiny"
    return out, ct2.to_ctranslate2(tiny_workdir, out)


@pytest.fixture(scope="module")
def marian_workdir(tmp_path_factory) -> pathlib.Path:
    workdir = tmp_path_factory.mktemp("marian") / "workdir"
    interop.from_hf(FIXTURES / "marian", workdir)
    return workdir


TEXTS = ["three thousand, one hundred and thirty-five", "nine", "", "eleven thousand, eight "
         "hundred and twenty-two", "five hundred and sixty-four"]  # fmt: skip


def test_trained_workdir_keeps_its_tokens_and_tokenizer(tiny_workdir, tiny_export):
    out, exported = tiny_export
    tokenizer = Translator.from_checkpoint(tiny_workdir).tokenizer
    assert exported.special_tokens == dict(unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                           decoder_start_token="<s>")  # fmt: skip
    config = json.loads((out / "config.json").read_text())
    assert {k: config[k] for k in exported.special_tokens} == exported.special_tokens
    assert config["add_source_eos"]
    vocabulary = json.loads((out / "shared_vocabulary.json").read_text())
    assert vocabulary == [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]
    assert (out / "tokenizer.model").read_bytes() == (tiny_workdir / "tokenizer.model").read_bytes()
    assert exported.steps == (30,) and exported.tokenizer == "sentencepiece"


def test_trained_workdir_decodes_the_same(tiny_workdir, tiny_export):
    translator = Translator.from_checkpoint(tiny_workdir)
    served = ct2.Ct2Translator(tiny_export[0], intra_threads=1)
    # Greedy, as each front end runs it by default (eos, max_len, blank texts).
    assert translator.translate(TEXTS, beam_size=1) == served.translate(TEXTS, beam_size=1)
    sources = [translator.tokenizer.encode(t) for t in TEXTS if t]
    src = np.zeros((len(sources), max(map(len, sources)) + 1), np.int32)  # pad = 0
    for row, ids in enumerate(sources):
        src[row, : len(ids) + 1] = ids + [EOS_ID]
    tokens, _ = greedy_decode(translator.model, jnp.asarray(src), max_len=20)
    want = [row[: row.index(EOS_ID)] if EOS_ID in row else row for row in tokens.tolist()]
    assert served.translate_ids(sources, beam_size=1, max_len=20) == want
    # Beam 4 over a fixed length: this short training run's model never ends a sentence, and
    # at the length limit the two rank unfinished hypotheses differently (see docs/ctranslate2.md).
    want, _ = fixed_length(translator.model, jnp.asarray(src), 4)
    pieces = [[served.pieces[i] for i in ids] for ids in sources]
    got, _ = ct2_fixed_length(served.translator, pieces, 4)
    assert [[served.pieces[i] for i in row] for row in np.asarray(want).tolist()] == got


def test_beam_search_with_eos_equals_translator(tiny_workdir, tmp_path):
    """A random model (eos made likely) in a workdir with the tiny run's tokenizer: outputs that
    end at eos at different steps, beam 4 ranked by summed log-prob on both sides."""
    tokenizer = Translator.from_checkpoint(tiny_workdir).tokenizer
    cfg = EncoderDecoderConfig(vocab_size=tokenizer.vocab_size, num_encoder_layers=2,
                               num_decoder_layers=3, d_model=24, num_heads=3, d_ff=40,
                               max_len=48, logits_bias=True, dropout_rate=0.0)  # fmt: skip
    params = nnx.state(random_model(cfg, eos_bias=5.3), nnx.Param)
    converted = interop.Converted(
        model_type="test", architecture="test", cfg=cfg, params=params, tokenizer=None,
        task="translation", labels=None, fresh=[], dropped={},
    )  # fmt: skip
    workdir = convert.write_workdir(converted, tmp_path / "workdir", "test").path
    shutil.copy(tiny_workdir / "tokenizer.model", workdir / "tokenizer.model")
    ct2.to_ctranslate2(workdir, tmp_path / "ct2")
    translator = Translator.from_checkpoint(workdir)
    served = ct2.Ct2Translator(tmp_path / "ct2", intra_threads=1)
    texts = [t for t in TEXTS if t] + ["one hundred and fifty-one", "fourteen", "nine thousand"]
    for beam in (1, 4):
        want = translator.translate(texts, beam_size=beam, alpha=0.0)
        assert served.translate(texts, beam_size=beam, length_penalty=0) == want, beam
        lengths = {len(tokenizer.encode(t)) for t in want}
        assert len(lengths) > 1, f"every output has the same length {lengths}: a weak test"


def test_converted_marian_greedy_equals_transformers(marian_workdir, tmp_path):
    exported = ct2.to_ctranslate2(marian_workdir, tmp_path / "ct2")
    # The tokenizer's own tokens: the decoder starts from <pad>, which it never emits.
    assert exported.special_tokens == dict(
        unk_token="<unk>", bos_token="<pad>", eos_token="</s>", decoder_start_token="<pad>"
    )
    assert exported.tokenizer == "pretrained"
    served = ct2.Ct2Translator(tmp_path / "ct2", intra_threads=1)
    ref = dict(np.load(FIXTURES / "marian" / "reference.npz"))
    meta = json.loads((FIXTURES / "marian" / "reference.json").read_text())
    texts = [item["text"] for item in meta["sources"]]
    eos = meta["special_tokens"]["eos"]
    sources = [served.tokenizer.encode(t) for t in texts]
    # transformers' inputs end with eos, which CTranslate2 appends.
    assert [ids + [eos] for ids in sources] == [item["input_ids"] for item in meta["sources"]]
    # transformers forces eos as the last of max_new_tokens; compare the tokens before it.
    limit = ref["greedy_ids"].shape[1] - 2
    want = []
    for row in ref["greedy_ids"][:, 1 : 1 + limit].tolist():
        want.append(row[: row.index(eos)] if eos in row else row)
    assert served.translate_ids(sources, beam_size=1, max_len=limit) == want
    translator = Translator.from_checkpoint(marian_workdir)
    got = served.translate(texts, beam_size=1, max_len=limit)
    assert got == translator.translate(texts, beam_size=1, max_len=limit)


def test_int8_export_is_smaller_and_translates(marian_workdir, tmp_path):
    ct2.to_ctranslate2(marian_workdir, tmp_path / "f32")
    exported = ct2.to_ctranslate2(marian_workdir, tmp_path / "int8", quantization="int8")
    assert exported.quantization == "int8"
    size = {n: (tmp_path / n / "model.bin").stat().st_size for n in ("f32", "int8")}
    assert size["int8"] < 0.6 * size["f32"], size
    served = ct2.Ct2Translator(tmp_path / "int8", compute_type="int8")
    assert len(served.translate(["The dog sleeps."], beam_size=2)) == 1


# ------------------------------------------------------------------------ refusals, the command
def test_refusals_name_the_problem_and_write_nothing(marian_workdir, tmp_path):
    with pytest.raises(ValueError, match="quantization='int4'"):
        ct2.to_ctranslate2(marian_workdir, tmp_path / "a", quantization="int4")
    gpt = tmp_path / "gpt"
    interop.from_hf(FIXTURES / "gpt2", gpt)
    with pytest.raises(interop.ConversionError, match="task='language_model'"):
        ct2.to_ctranslate2(gpt, tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    cfg = EncoderDecoderConfig(**{**SHAPE, "num_encoder_layers": 0})
    with pytest.raises(interop.ConversionError, match="num_encoder_layers=0"):
        ct2.check_exportable(cfg, "model.json")  # CTranslate2 cannot load an empty stack.


def test_missing_ctranslate2_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    with pytest.raises(ImportError, match=r"transformer_jax\[ctranslate2\]"):
        ct2.import_ctranslate2()


def test_convert_command_writes_a_directory_that_loads(tiny_workdir, tmp_path, capsys):
    out = tmp_path / "served"
    argv = [f"--workdir={tiny_workdir}", f"--to_ctranslate2={out}", "--quantization=int8"]
    assert convert_cli.main(argv) == 0
    assert "int8" in capsys.readouterr().out
    assert ctranslate2.Translator(str(out)).model_is_loaded
    assert json.loads((out / ct2.META).read_text())["quantization"] == "int8"


def test_convert_command_refuses_what_it_cannot_do(tiny_workdir, marian_workdir, tmp_path, capsys):
    gpt = tmp_path / "gpt"
    interop.from_hf(FIXTURES / "gpt2", gpt)
    assert convert_cli.main([f"--workdir={gpt}", f"--to_ctranslate2={tmp_path / 'a'}"]) == 1
    assert "task='language_model'" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("keep me")
    assert convert_cli.main([f"--workdir={marian_workdir}", f"--to_ctranslate2={busy}"]) == 1
    assert "not empty" in capsys.readouterr().err
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    assert (busy / "notes.txt").read_text() == "keep me"
    both = [f"--workdir={tiny_workdir}", "--to_hf=x", f"--to_ctranslate2={tmp_path / 'c'}"]
    assert convert_cli.main(both) == 1
    assert "exactly one of" in capsys.readouterr().err
    assert convert_cli.main([f"--workdir={gpt}", "--to_hf=y", "--quantization=int8"]) == 1
    assert "--quantization" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()
