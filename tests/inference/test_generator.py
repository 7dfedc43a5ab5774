"""Generation with the decoder-only model: left-padded cached decoding = the teacher-forced pass,
greedy equivalences against a hand-written greedy loop, batching, streaming, bad input, and
loading a language-model workdir through the Python API and the generate command line."""

import io
import re
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from transformer_jax.cli import generate as generate_cli
from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.inference import Generator
from transformer_jax.inference import generator as generator_module
from transformer_jax.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer_jax.runs.checkpoints import Checkpoints
from transformer_jax.runs.layout import CheckpointError, Workdir
from transformer_jax.runs.tokenizer import load_tokenizer
from transformer_jax.tokens import BOS_ID, EOS_ID
from transformer_jax.training.state import TrainState

TOKENIZER = ByteTokenizer()
MAX_LEN = 48  # The tiny models' context.


def tiny_model(seed: int = 1, **overrides) -> DecoderOnly:
    fields = dict(vocab_size=TOKENIZER.vocab_size, max_len=MAX_LEN) | overrides
    return DecoderOnly(DecoderOnlyConfig.tiny(**fields), rngs=nnx.Rngs(seed))


@pytest.fixture(scope="module")
def gen() -> Generator:
    return Generator(tiny_model(), TOKENIZER)


@nnx.jit
def _full_pass(model: DecoderOnly, tokens: jnp.ndarray) -> jnp.ndarray:
    return model(tokens, segment_ids=jnp.ones_like(tokens))  # causal only: no pad-id masking


def greedy_reference(model: DecoderOnly, ids: list[int], count: int) -> str:
    """The greedy continuation by full teacher-forced passes (no cache, no left padding).

    Each pass reads a fixed `[1, MAX_LEN]` buffer (one compilation); the causal mask keeps the
    tokens after position `len(ids) - 1` from changing its logits.
    """
    ids, new = list(ids), []
    for _ in range(count):
        buffer = jnp.asarray([ids + [0] * (MAX_LEN - len(ids))])
        new.append(int(jnp.argmax(_full_pass(model, buffer)[0, len(ids) - 1])))
        if new[-1] == EOS_ID:
            break
        ids.append(new[-1])
    return TOKENIZER.decode(new)


def prompt_ids(text: str) -> list[int]:
    return [BOS_ID, *TOKENIZER.encode(text)]


# ------------------------------------------------------------------------ the model's cache
@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
def test_prefill_and_steps_equal_the_full_pass_for_left_padded_rows(positional):
    model = tiny_model(3, vocab_size=53, max_len=24, positional=positional)
    rng = np.random.default_rng(0)
    a, b, pad = rng.integers(4, 53, 11), rng.integers(4, 53, 7), 4
    batch = np.stack([a, np.concatenate([rng.integers(4, 53, pad), b])])  # row 1: junk padding
    graphdef, params = nnx.split(model)
    step = jax.jit(lambda p, tokens, cache: nnx.merge(graphdef, p).decode_step(tokens, cache))
    cache = model.init_cache(2, 13, jnp.asarray([0, pad]))
    logits, cache = step(params, jnp.asarray(batch[:, :6]), cache)  # prefill 6 columns
    steps = [logits]
    for t in range(6, 11):
        logits, cache = step(params, jnp.asarray(batch[:, t : t + 1]), cache)
        steps.append(logits)
    cached = np.asarray(jnp.concatenate(steps, axis=1))  # [2, 11, V]
    np.testing.assert_allclose(cached[0], _full_pass(model, jnp.asarray(a[None]))[0], atol=1e-5)
    np.testing.assert_allclose(
        cached[1, pad:], _full_pass(model, jnp.asarray(b[None]))[0], atol=1e-5
    )
    # No `start` is no padding: the unpadded row is unchanged.
    plain, _ = step(params, jnp.asarray(a[None, :6]), model.init_cache(1, 13))
    np.testing.assert_allclose(plain[0], cached[0, :6], atol=1e-6)


# ------------------------------------------------------------------------------ generation
PROMPTS = ["", "ab", "The json module", "a prompt of thirty-five bytes, long"]


def test_temperature_zero_and_top_k_one_are_greedy(gen):
    want = [greedy_reference(gen.model, prompt_ids(p), 10) for p in PROMPTS]
    assert gen.generate(PROMPTS, 10, temperature=0) == want
    assert gen.generate(PROMPTS, 10, temperature=0.7, top_k=1, seed=3) == want


def test_a_batch_of_different_lengths_equals_each_prompt_alone(gen):
    alone = [gen.generate([p], 12, temperature=0)[0] for p in PROMPTS]
    assert gen.generate(PROMPTS, 12, temperature=0) == alone
    assert gen.generate(PROMPTS, 12, temperature=0, batch_size=3) == alone  # two batches


def test_sampling_settings_and_similar_prompts_reuse_the_compiled_loop(gen):
    gen.generate(["a", "bc"], 6, temperature=0.5)
    compiled = generator_module._generate._cache_size()
    gen.generate(["xyz", ""], 6, temperature=0.9, top_k=3, top_p=0.5, seed=7)
    assert generator_module._generate._cache_size() == compiled


def test_stream_pieces_join_to_generate(gen):
    for settings in [dict(temperature=1.0, top_k=50, top_p=0.9, seed=3), dict(temperature=0)]:
        pieces = list(gen.stream("ab", 24, **settings))
        assert "".join(pieces) == gen.generate(["ab"], 24, **settings)[0]
        assert len(pieces) > 1
        assert not any(p.endswith("\ufffd") for p in pieces[:-1])
    sampled = dict(temperature=1.0, top_p=0.9)
    assert gen.generate(["ab"], 24, seed=3, **sampled) != gen.generate(
        ["ab"], 24, seed=4, **sampled
    )


def test_stream_holds_back_a_character_until_its_last_byte(gen, monkeypatch):
    script = jnp.asarray([*TOKENIZER.encode("é€!"), EOS_ID, *TOKENIZER.encode("never")])

    def scripted_step(graphdef, params, cache, token, key, t, *settings, greedy):
        return jnp.full(token.shape, script[t]), cache

    monkeypatch.setattr(generator_module, "_one_step", scripted_step)
    assert list(gen.stream("x", 10, temperature=0)) == ["é", "€", "!"]


BAD = [
    (dict(temperature=-0.5), "temperature", "-0.5"),
    (dict(temperature=float("nan")), "temperature", "nan"),
    (dict(top_p=0.0), "top_p", "0.0"),
    (dict(top_p=1.5), "top_p", "1.5"),
    (dict(top_k=-1), "top_k", "-1"),
    (dict(max_new_tokens=0), "max_new_tokens", "0"),
    (dict(max_new_tokens=MAX_LEN), "max_new_tokens", str(MAX_LEN)),
]


@pytest.mark.parametrize(("bad", "name", "value"), BAD)
def test_bad_settings_raise_naming_the_setting_and_value(gen, bad, name, value):
    kwargs = dict(max_new_tokens=4) | bad
    with pytest.raises(ValueError, match=rf"{name}.*{re.escape(value)}"):
        gen.generate(["x"], **kwargs)
    with pytest.raises(ValueError, match=rf"{name}.*{re.escape(value)}"):
        gen.stream("x", **kwargs)  # before the first piece is asked for
    with pytest.raises(ValueError, match="batch_size"):
        gen.generate(["x"], 4, batch_size=0)


def test_a_prompt_too_long_for_the_context_keeps_its_last_tokens(gen):
    tail = "abcdefghijklmnopqrs"  # room for 48 - 18 = 30 tokens: BOS + 20 + these 19 is 40
    with pytest.warns(UserWarning, match="first 10 tokens were dropped"):
        (got,) = gen.generate(["X" * 20 + tail], 18, temperature=0)
    kept = prompt_ids("X" * 20 + tail)[-30:]
    assert got == greedy_reference(gen.model, kept, 18)  # at most 18 new tokens
    with pytest.warns(UserWarning, match="first 10 tokens"):
        assert "".join(gen.stream("X" * 20 + tail, 18, temperature=0)) == got


# -------------------------------------------------------------------------- workdir and CLI
def test_load_tokenizer_follows_the_data_tokenizer_field(tmp_path):
    workdir = Workdir.at(tmp_path)
    config = ml_collections.ConfigDict({"data": {"tokenizer": "byte"}})
    assert isinstance(load_tokenizer(workdir, config), ByteTokenizer)
    for fields in [{"data": {"tokenizer": "sentencepiece"}}, {"data": {}}, {}]:  # translation
        with pytest.raises(CheckpointError, match="tokenizer.model is missing"):
            load_tokenizer(workdir, ml_collections.ConfigDict(fields))


@pytest.fixture(scope="module")
def lm_workdir(tmp_path_factory):
    """A language-model workdir written the way train.py writes one, with step 10 of a random
    tiny model; returns (path, that model)."""
    path = tmp_path_factory.mktemp("lm_run")
    workdir, model = Workdir.at(path), tiny_model(7)
    config = {"task": "language_model", "model": {"name": "decoder_only"}}
    workdir.write_config(ml_collections.ConfigDict(config | {"data": {"tokenizer": "byte"}}))
    workdir.write_model("decoder_only", model.cfg)
    _, params = nnx.split(model)
    state = TrainState(step=jnp.int32(10), params=params, opt_state={"count": jnp.int32(10)})
    checkpoints = Checkpoints(workdir, keep=1, best_metric="loss", best_mode="min")
    checkpoints.save(10, state, {}, {"seed": 0}, force=True)
    checkpoints.wait()
    checkpoints.close()
    return path, model


def test_from_checkpoint_restores_the_saved_model(lm_workdir):
    path, model = lm_workdir
    loaded = Generator.from_checkpoint(path)
    assert loaded.steps == (10,) and isinstance(loaded.tokenizer, ByteTokenizer)
    expected = Generator(model, TOKENIZER).generate(PROMPTS[:2], 8, temperature=0)
    assert loaded.generate(PROMPTS[:2], 8, temperature=0) == expected


def test_cli_streams_one_prompt_and_answers_stdin_line_by_line(lm_workdir, capsys, monkeypatch):
    path, _ = lm_workdir
    loaded = Generator.from_checkpoint(path)
    args = [f"--workdir={path}", "--max_new_tokens=12"]
    # One --prompt: the prompt, then the streamed continuation (default sampling flags).
    assert generate_cli.main([*args, "--prompt=ab"]) == 0
    want = loaded.generate(["ab"], 12, temperature=0.8, top_p=0.95, seed=0)[0]
    assert capsys.readouterr().out == "ab" + want + "\n"
    # Stdin: one escaped continuation per line, in order.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ab\n\nxyz\n")))
    assert generate_cli.main([*args, "--temperature=0"]) == 0
    want = loaded.generate(["ab", "", "xyz"], 12, temperature=0)
    assert capsys.readouterr().out == "".join(generate_cli.escape(w) + "\n" for w in want)
    assert generate_cli.escape("a\nb\\n\r") == "a\\nb\\\\n\\r"  # unambiguous, one line


def test_cli_errors_are_one_line_and_write_nothing_to_stdout(
    lm_workdir, tiny_workdir, tmp_path, capsys
):
    path, _ = lm_workdir
    cases = [
        ([f"--workdir={tiny_workdir}", "--prompt=x"], "'decoder_only' language model"),
        ([f"--workdir={tmp_path / 'missing'}", "--prompt=x"], "does not exist"),
        ([f"--workdir={path}", "--prompt=x", "--top_p=1.5"], "top_p must be in (0, 1]"),
        ([f"--workdir={path}", "--prompt=x", f"--max_new_tokens={MAX_LEN}"], "no room"),
    ]
    for argv, message in cases:
        assert generate_cli.main(argv) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("error: ") and message in err
        assert err.count("\n") == 1
