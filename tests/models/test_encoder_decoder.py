"""The encoder-decoder model: shapes, causality, padding, KV cache, jit, bfloat16, init."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax import EncoderDecoder, EncoderDecoderConfig
from transformer_jax.nn import KVCache, MemoryKV

# All different: batch 3, source 7, target 5, heads 2, head dim 6, vocab 17.
B, S, T, N, HD, V = 3, 7, 5, 2, 6, 17


def _cfg(**kw):
    fields = dict(
        vocab_size=V,
        num_encoder_layers=2,
        num_decoder_layers=3,
        d_model=N * HD,
        num_heads=N,
        d_ff=20,
        dropout_rate=0.0,
        max_len=16,
    )
    return EncoderDecoderConfig(**{**fields, **kw})


def _model(**kw):
    return EncoderDecoder(_cfg(**kw), rngs=nnx.Rngs(0))


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(4, V, (B, S))
    tgt = rng.integers(4, V, (B, T))
    src[0, 5:] = 0  # row 0: 5 real source tokens
    src[1, 3:] = 0
    tgt[:, 0] = 2  # bos
    tgt[1, 4:] = 0
    return jnp.asarray(src), jnp.asarray(tgt)


NORMS = pytest.mark.parametrize("norm", ["post", "pre"])


@NORMS
def test_output_and_attention_shapes(norm):
    model = _model(norm=norm)
    src, tgt = _batch()
    logits, attn = model(src, tgt, return_attention=True)
    assert logits.shape == (B, T, V) and logits.dtype == jnp.float32
    assert model.encode(src).shape == (B, S, N * HD)
    assert len(attn["encoder"]) == 2 and len(attn["decoder_self"]) == 3
    assert attn["encoder"][0].shape == (B, N, S, S)
    assert attn["decoder_self"][0].shape == (B, N, T, T)
    assert attn["decoder_cross"][2].shape == (B, N, T, S)
    np.testing.assert_allclose(attn["decoder_cross"][0].sum(-1), 1.0, rtol=1e-5)


@NORMS
def test_decoder_is_causal(norm):
    model = _model(norm=norm)
    src, tgt = _batch()
    ref = model(src, tgt)
    for t in range(T - 1):
        changed = tgt.at[:, t + 1 :].set(
            jnp.asarray(np.random.default_rng(t).integers(4, V, (B, T - t - 1)))
        )
        out = model(src, changed)
        np.testing.assert_allclose(out[:, : t + 1], ref[:, : t + 1], atol=1e-5)
        assert not np.allclose(out[:, t + 1 :], ref[:, t + 1 :], atol=1e-5)


@NORMS
def test_pad_count_does_not_change_real_outputs(norm):
    """Encoder, cross-attention and decoder: more trailing pads change no non-pad output."""
    model = _model(norm=norm)
    src, tgt = _batch()
    ref_mem = model.encode(src)
    ref = model(src, tgt)
    src_long = jnp.pad(src, ((0, 0), (0, 4)))
    tgt_long = jnp.pad(tgt, ((0, 0), (0, 3)))
    mem = model.encode(src_long)
    out = model(src_long, tgt_long)
    real_src = np.asarray(src != 0)
    np.testing.assert_allclose(
        np.asarray(mem[:, :S])[real_src], np.asarray(ref_mem)[real_src], atol=1e-5
    )
    real_tgt = np.asarray(tgt != 0)
    np.testing.assert_allclose(
        np.asarray(out[:, :T])[real_tgt], np.asarray(ref)[real_tgt], atol=1e-5
    )


@NORMS
def test_values_under_padding_do_not_matter(norm):
    """With segment ids marking padding, arbitrary token values there change no real output."""
    model = _model(norm=norm)
    src, tgt = _batch()
    src_seg = (src != 0).astype(jnp.int32)
    tgt_seg = (tgt != 0).astype(jnp.int32)
    kw = dict(src_segment_ids=src_seg, tgt_segment_ids=tgt_seg)
    ref = model(src, tgt, **kw)
    rng = np.random.default_rng(1)
    noisy_src = jnp.where(src_seg == 0, jnp.asarray(rng.integers(1, V, (B, S))), src)
    noisy_tgt = jnp.where(tgt_seg == 0, jnp.asarray(rng.integers(1, V, (B, T))), tgt)
    out = model(noisy_src, noisy_tgt, **kw)
    real = np.asarray(tgt_seg == 1)
    np.testing.assert_allclose(np.asarray(out)[real], np.asarray(ref)[real], atol=1e-5)
    # Same logits as the unpacked call, where padding is found from pad ids.
    np.testing.assert_allclose(np.asarray(model(src, tgt))[real], np.asarray(ref)[real], atol=1e-5)


def test_packed_row_equals_separate_rows():
    """Two pairs packed into one row give the logits each pair gets alone."""
    model = _model()
    a_src, a_tgt = jnp.array([[5, 6, 7]]), jnp.array([[2, 8, 9]])
    b_src, b_tgt = jnp.array([[10, 11]]), jnp.array([[2, 12, 13, 14]])
    packed = model(
        jnp.concatenate([a_src, b_src], 1),
        jnp.concatenate([a_tgt, b_tgt], 1),
        src_segment_ids=jnp.array([[1, 1, 1, 2, 2]]),
        tgt_segment_ids=jnp.array([[1, 1, 1, 2, 2, 2, 2]]),
        src_positions=jnp.array([[0, 1, 2, 0, 1]]),
        tgt_positions=jnp.array([[0, 1, 2, 0, 1, 2, 3]]),
    )
    np.testing.assert_allclose(packed[:, :3], model(a_src, a_tgt), atol=1e-5)
    np.testing.assert_allclose(packed[:, 3:], model(b_src, b_tgt), atol=1e-5)


@NORMS
@pytest.mark.parametrize("positional", ["sinusoidal", "learned"])
def test_kv_cache_matches_teacher_forcing(norm, positional):
    """Also for a tied output, read through the E^T the cache holds (`output_table`)."""
    tied = positional == "sinusoidal"
    model = _model(norm=norm, positional=positional, share_embeddings=tied, tie_output=tied)
    src, tgt = _batch(3)
    tgt = jnp.where(tgt == 0, 5, tgt)  # the cache decodes full rows
    full = model(src, tgt)
    memory = model.encode(src)
    cache = model.init_cache(memory, model.source_mask(src), max_len=T + 2)
    step = jax.jit(lambda m, tok, c: m.decode_step(tok, c))
    assert ("output_table" in cache) == tied
    for t in range(T):
        logits, cache = step(model, tgt[:, t], cache)
        np.testing.assert_allclose(logits, full[:, t], atol=1e-4, rtol=1e-4)
    assert int(cache["index"]) == T


def test_cross_attention_cache_is_computed_once():
    model = _model()
    src, _ = _batch()
    cache = model.init_cache(model.encode(src), model.source_mask(src), max_len=4)
    layer = cache["layers"][0]
    assert isinstance(layer["cross"], MemoryKV) and isinstance(layer["self"], KVCache)
    assert layer["cross"].key.shape == (B, N, S, HD)  # heads first: read without a transpose
    assert layer["self"].key.shape == (B, N, 4, HD)
    _, cache2 = model.decode_step(jnp.full((B,), 2), cache)
    assert cache2["layers"][0]["cross"] is layer["cross"]  # untouched, not recomputed
    assert int(cache2["layers"][0]["self"].index) == 1


def test_learned_positions_cache_longer_than_max_len_is_refused():
    model = _model(positional="learned")
    src, _ = _batch()
    with pytest.raises(ValueError, match="max_len"):
        model.init_cache(model.encode(src), model.source_mask(src), max_len=100)


def test_jit_matches_eager_and_dropout_needs_key():
    model = _model(dropout_rate=0.3)
    src, tgt = _batch()
    eager = model(src, tgt)
    jitted = nnx.jit(lambda m, s, t: m(s, t))(model, src, tgt)
    np.testing.assert_allclose(jitted, eager, atol=1e-5)
    with pytest.raises(ValueError, match="rng"):
        model(src, tgt, deterministic=False)
    a = model(src, tgt, deterministic=False, rng=jax.random.key(0))
    b = model(src, tgt, deterministic=False, rng=jax.random.key(0))
    c = model(src, tgt, deterministic=False, rng=jax.random.key(1))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c) and not np.allclose(a, eager)


def test_bfloat16_computation_close_to_float32():
    f32 = _model()
    bf16 = _model(dtype="bfloat16")
    src, tgt = _batch()
    params = jax.tree.leaves(nnx.state(bf16, nnx.Param))
    assert all(p.dtype == jnp.float32 for p in params)
    ref, low = f32(src, tgt), bf16(src, tgt)
    assert low.dtype == jnp.float32
    np.testing.assert_allclose(low, ref, atol=0.15)
    assert np.mean(np.abs(low - ref)) < 0.03


def test_initialisation_scales():
    cfg = EncoderDecoderConfig.tiny(vocab_size=400, d_model=64, num_heads=4, d_ff=128)
    model = EncoderDecoder(cfg, rngs=nnx.Rngs(0))
    emb = np.asarray(model.src_embed.embedding[...])
    assert emb.std() == pytest.approx(64**-0.5, rel=0.05)  # unit variance after * sqrt(d_model)
    assert model.tgt_embed is model.src_embed
    q = np.asarray(model.encoder.layers[0].self_attn.query[...])
    limit = np.sqrt(6.0 / (64 + 64))  # Xavier-uniform on the [d_model, heads*head_dim] view
    assert np.abs(q).max() <= limit and np.abs(q).max() > 0.9 * limit
    axes = model.encoder.layers[0].ffn.w1.get_metadata()["logical_axes"]
    assert axes == ("embed", "mlp")


def test_shape_annotations_are_checked_at_run_time():
    """conftest installs jaxtyping's import hook: a wrongly shaped argument is refused."""
    import jaxtyping

    model = _model()
    with pytest.raises(jaxtyping.TypeCheckError):
        model.encode(jnp.zeros((S,), jnp.int32))


REFERENCE_ACTIVATIONS = {  # Written out from their definitions, not through jax.nn.gelu.
    "relu": lambda h: np.maximum(h, 0.0),
    "gelu": lambda h: 0.5 * h * (1.0 + np.vectorize(math.erf)(h / math.sqrt(2.0))),
    "gelu_tanh": lambda h: (
        0.5 * h * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    ),
    "silu": lambda h: h / (1.0 + np.exp(-h)),  # x * sigmoid(x), Marian's "swish"
}


@pytest.mark.parametrize("activation", sorted(REFERENCE_ACTIVATIONS))
def test_feed_forward_matches_equation_2(activation):
    """FFN(x) = act(x W1 + b1) W2 + b2, position by position (§3.3); exact and tanh GELU, SiLU."""
    from transformer_jax.nn.layers import FeedForward

    ffn = FeedForward(6, 10, activation=activation, rngs=nnx.Rngs(1))
    ffn.b1[...] = jnp.linspace(-1, 1, 10)
    x = jax.random.normal(jax.random.key(2), (B, T, 6))
    h = np.asarray(x @ ffn.w1[...] + ffn.b1[...], np.float64)
    want = REFERENCE_ACTIVATIONS[activation](h) @ np.asarray(ffn.w2[...]) + np.asarray(ffn.b2[...])
    np.testing.assert_allclose(ffn(x), want, rtol=1e-5, atol=1e-6)


def test_exact_and_tanh_gelu_differ():
    """'gelu' is the erf form (BERT, ViT), 'gelu_tanh' the approximation (GPT-2): not the same."""
    from transformer_jax.nn.layers import ACTIVATIONS

    h = jnp.linspace(-3, 3, 61)
    gap = np.abs(np.asarray(ACTIVATIONS["gelu"](h) - ACTIVATIONS["gelu_tanh"](h))).max()
    assert 1e-4 < gap < 1e-2


def test_unknown_activation_is_refused_with_the_choices():
    from transformer_jax.nn.layers import FeedForward

    choices = "one of \\('relu', 'gelu', 'gelu_tanh', 'silu'\\), got 'tanh'"
    with pytest.raises(ValueError, match=choices):
        FeedForward(6, 10, activation="tanh", rngs=nnx.Rngs(1))
