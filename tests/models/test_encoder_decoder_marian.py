"""The encoder-decoder's options for Marian (OPUS-MT) checkpoints: each does what its formula says.

`positional="sinusoidal_halves"`, `activation="silu"`, `logits_bias=True`,
`scale_embeddings=False`; at their defaults the model and its hash are the paper's, as before.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs import default, wmt14_en_de_base
from transformer_jax import EncoderDecoder, EncoderDecoderConfig, models, sharding
from transformer_jax.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer_jax.nn import sinusoidal_encoding
from transformer_jax.runs.identity import model_hash

# All different: batch 3, source 7, target 5, heads 2, head dim 6, vocabulary 17.
B, S, T, N, HD, V = 3, 7, 5, 2, 6, 17
D = N * HD
MARIAN = dict(
    positional="sinusoidal_halves", activation="silu", logits_bias=True, layer_norm_eps=1e-5
)


def _model(seed=0, **kw):
    fields = dict(
        vocab_size=V,
        num_encoder_layers=2,
        num_decoder_layers=3,
        d_model=D,
        num_heads=N,
        d_ff=20,
        dropout_rate=0.0,
        max_len=16,
    )
    return EncoderDecoder(EncoderDecoderConfig(**{**fields, **kw}), rngs=nnx.Rngs(seed))


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(4, V, (B, S))
    tgt = rng.integers(4, V, (B, T))
    src[0, 5:] = 0
    tgt[:, 0] = 2  # bos
    return jnp.asarray(src), jnp.asarray(tgt)


def _random_bias(model, seed=1, scale=1.0):
    bias = scale * jax.random.normal(jax.random.key(seed), (V,))
    model.logits_bias[...] = bias
    return np.asarray(bias)


# ---------------------------------------------------------------------------- defaults
def test_the_new_fields_default_to_the_paper():
    cfg = EncoderDecoderConfig.base()
    assert cfg.positional == "sinusoidal" and cfg.activation == "relu"
    assert cfg.scale_embeddings is True and cfg.logits_bias is False
    assert "logits_bias" not in nnx.state(_model(), nnx.Param)


def test_existing_configs_keep_their_model_hash():
    """Hashes computed before the Marian fields existed: fields at their defaults are left out of
    the hashed text, so runs trained before keep resuming and serving."""
    assert model_hash(default.get_config()) == (
        "9b1afe40358f6c3dfb38cee77f3099c49c64d540c74e6c9b0c46797fba91f39c"
    )
    base = "77f93848ec7c84a71732f5ea71b82a78190b3ab6ec239e28ec0862480e4d1381"
    float32 = wmt14_en_de_base.get_config()
    float32.model.dtype = "float32"  # The config computes in bfloat16 (the accelerators' dtype).
    assert model_hash(float32) == base
    assert model_hash({"task": "translation", "model": {"name": "encoder_decoder"}}) == base
    for field, value in MARIAN.items():
        config = wmt14_en_de_base.get_config()
        config.model.dtype = "float32"
        config.model[field] = value
        assert model_hash(config) != base, field


# --------------------------------------------------------------------------- positions
@pytest.mark.parametrize("positional", ["sinusoidal", "sinusoidal_halves"])
@pytest.mark.parametrize("scale_embeddings", [True, False])
def test_embedding_scale_and_positions_as_configured(positional, scale_embeddings):
    """With no encoder layers (post-LN: no final norm) the memory is the embedding sum:
    E[src] * (sqrt(d_model) or 1) + PE in the configured layout."""
    model = _model(num_encoder_layers=0, positional=positional, scale_embeddings=scale_embeddings)
    src, _ = _batch()
    table = np.asarray(model.src_embed.embedding[...])
    layout = "halves" if positional == "sinusoidal_halves" else "interleaved"
    pe = np.asarray(sinusoidal_encoding(S, D, layout=layout))
    scale = np.sqrt(D) if scale_embeddings else 1.0
    want = table[np.asarray(src)] * scale + pe
    np.testing.assert_allclose(model.encode(src), want, rtol=1e-6, atol=1e-6)
    other = "interleaved" if layout == "halves" else "halves"
    assert not np.allclose(pe, sinusoidal_encoding(S, D, layout=other), atol=1e-3)


def test_unscaled_embeddings_are_drawn_at_std_002():
    """Unit-variance inputs either way: std d^-0.5 times sqrt(d), or (Marian, BART) std 0.02."""
    cfg = EncoderDecoderConfig.tiny(vocab_size=400, d_model=64, num_heads=4, d_ff=128)
    scaled = EncoderDecoder(cfg, rngs=nnx.Rngs(0)).src_embed
    unscaled = EncoderDecoder(cfg.replace(scale_embeddings=False), rngs=nnx.Rngs(0)).src_embed
    assert (scaled.scale, unscaled.scale) == (8.0, 1.0)
    assert np.asarray(unscaled.embedding[...]).std() == pytest.approx(0.02, rel=0.05)


def test_decoder_only_takes_halves_positions_too():
    """The config value is shared: the decoder-only model adds the halves table (its prefill and
    steps agree, and its logits differ from the interleaved table's)."""
    cfg = DecoderOnlyConfig.tiny(vocab_size=V, positional="sinusoidal_halves")
    model = DecoderOnly(cfg, rngs=nnx.Rngs(0))
    tokens = jnp.asarray(np.random.default_rng(0).integers(4, V, (B, T)))
    full = model(tokens)
    cache = model.init_cache(B, T)
    steps = []
    for t in range(T):
        logits, cache = model.decode_step(tokens[:, t : t + 1], cache)
        steps.append(logits[:, 0])
    np.testing.assert_allclose(jnp.stack(steps, 1), full, atol=1e-4, rtol=1e-4)
    paper = DecoderOnly(cfg.replace(positional="sinusoidal"), rngs=nnx.Rngs(0))
    assert not np.allclose(paper(tokens), full, atol=1e-3)


# -------------------------------------------------------------------------- logits bias
@pytest.mark.parametrize("tie_output", [True, False])
def test_logits_bias_adds_exactly_the_bias(tie_output):
    """Same seed, same parameters (the bias draws no random numbers): the logits differ by the
    bias alone, broadcast over batch and positions."""
    plain = _model(tie_output=tie_output, share_embeddings=tie_output)
    biased = _model(tie_output=tie_output, share_embeddings=tie_output, logits_bias=True)
    np.testing.assert_array_equal(biased.logits_bias[...], np.zeros(V))  # zeros at init
    bias = _random_bias(biased)
    src, tgt = _batch()
    out = biased(src, tgt)
    assert out.dtype == jnp.float32 and out.shape == (B, T, V)
    np.testing.assert_allclose(out - plain(src, tgt), np.broadcast_to(bias, (B, T, V)), atol=1e-5)


def test_logits_bias_is_one_vocab_sharded_parameter():
    """Path `logits_bias`, shape [V], float32, logical axis "vocab": split over the tensor axis
    like the embedding's vocabulary rows."""
    cfg = EncoderDecoderConfig.tiny(vocab_size=64, logits_bias=True)
    _, state = models.abstract_model(cfg)
    flat = dict(nnx.to_flat_state(state))
    bias = flat[("logits_bias",)]
    assert bias.shape == (64,) and bias.dtype == jnp.float32
    assert bias.get_metadata()["logical_axes"] == ("vocab",)
    assert models.count_params(cfg) == models.count_params(cfg.replace(logits_bias=False)) + 64
    mesh = sharding.make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
    specs = dict(nnx.to_flat_state(sharding.param_shardings(state, mesh)))
    assert specs[("logits_bias",)].get_value().spec == jax.sharding.PartitionSpec("tensor")
    embedding = specs[("src_embed", "embedding")].get_value().spec
    assert embedding == jax.sharding.PartitionSpec("tensor", "fsdp")


# ------------------------------------------------------------------------- all together
def test_kv_cache_matches_teacher_forcing_with_every_marian_option():
    """Post-LN, halves positions, SiLU, a non-zero logits bias, LayerNorm eps 1e-5: the cached
    steps give the teacher-forced logits."""
    model = _model(3, norm="post", **MARIAN)
    _random_bias(model)
    src, tgt = _batch(3)
    full = model(src, tgt)
    cache = model.init_cache(model.encode(src), model.source_mask(src), max_len=T + 2)
    step = jax.jit(lambda m, tok, c: m.decode_step(tok, c))
    for t in range(T):
        logits, cache = step(model, tgt[:, t], cache)
        np.testing.assert_allclose(logits, full[:, t], atol=1e-4, rtol=1e-4)
    relu = _model(3, norm="post", **{**MARIAN, "activation": "relu"})
    relu.logits_bias[...] = model.logits_bias[...]
    assert not np.allclose(relu(src, tgt), full, atol=1e-3)  # the activation is in use


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(positional="rotary"), "positional='rotary' is not one of "
         "('sinusoidal', 'sinusoidal_halves', 'learned')"),
        (dict(activation="swish"), "activation='swish' is not one of "
         "('relu', 'gelu', 'gelu_tanh', 'silu')"),
        (dict(positional="sinusoidal_halves", d_model=9, num_heads=3), "must be even"),
    ],
)  # fmt: skip
def test_unknown_names_are_refused_with_the_choices(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EncoderDecoderConfig.tiny(**changes)


def test_a_section_with_a_non_boolean_flag_is_refused():
    section = models.config_section("encoder_decoder", "tiny", vocab_size=64, logits_bias="yes")
    with pytest.raises(ValueError, match="logits_bias must be True or False"):
        models.build_config(section)
