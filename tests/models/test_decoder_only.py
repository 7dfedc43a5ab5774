"""The decoder-only language model (GPT): sizes, causality, packing, the shared KV cache, padding
told by a mask (never by token id), and a generic train step that learns with it (a new model
needs no change to the training code)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from transformer_jax import models
from transformer_jax import sharding as shd
from transformer_jax.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer_jax.training import step as ts
from transformer_jax.training.optimizer import make_optimizer
from transformer_jax.training.state import create_train_state

# All different: batch 3, length 7, heads 2, head dim 6, vocab 19.
B, T, N, HD, V = 3, 7, 2, 6, 19


def _model(**kw):
    cfg = DecoderOnlyConfig.tiny(vocab_size=V, d_model=N * HD, num_heads=N, max_len=16, **kw)
    return DecoderOnly(cfg, rngs=nnx.Rngs(0))


def _tokens(seed=0, length=T):
    return jnp.asarray(np.random.default_rng(seed).integers(4, V, (B, length)))


def test_gpt2_small_and_gpt1_sizes_from_abstract_shapes():
    gpt2 = DecoderOnlyConfig.gpt2_small()
    assert (gpt2.vocab_size, gpt2.max_len, gpt2.num_layers, gpt2.d_model) == (50257, 1024, 12, 768)
    # GPT-2 small has 124,439,808 parameters; ours lack its 12 x 768 key biases (see
    # MultiHeadAttention: a key bias only receives zero gradient).
    assert models.count_params(gpt2) == 124_439_808 - 12 * 768
    assert round(models.count_params(DecoderOnlyConfig.gpt1()) / 1e6) == 117  # "117M"


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_shapes_and_causality(norm):
    model = _model(norm=norm)
    tokens = _tokens()
    logits, weights = model(tokens, return_attention=True)
    assert logits.shape == (B, T, V) and logits.dtype == jnp.float32
    assert len(weights) == 2 and weights[0].shape == (B, N, T, T)
    changed = model(tokens.at[:, 4:].set(5))
    np.testing.assert_allclose(changed[:, :4], logits[:, :4], atol=1e-5)
    assert not np.allclose(changed[:, 4:], logits[:, 4:], atol=1e-5)


def test_packed_documents_do_not_see_each_other():
    model = _model()
    a, b = _tokens(1, 3)[:1], _tokens(2, 4)[:1]
    packed = model(
        jnp.concatenate([a, b], 1),
        segment_ids=jnp.array([[1, 1, 1, 2, 2, 2, 2]]),
        positions=jnp.array([[0, 1, 2, 0, 1, 2, 3]]),
    )
    np.testing.assert_allclose(packed[:, :3], model(a), atol=1e-5)
    np.testing.assert_allclose(packed[:, 3:], model(b), atol=1e-5)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
@pytest.mark.parametrize("prompt", [1, 4])
def test_prefill_then_one_token_per_step_equals_the_full_pass(positional, prompt):
    model = _model(positional=positional, norm="post")
    tokens = _tokens(3)
    full = model(tokens)
    cache = model.init_cache(B, T + 3)
    step = jax.jit(lambda m, tok, c: m.decode_step(tok, c))
    logits, cache = step(model, tokens[:, :prompt], cache)
    outs = [logits]
    for t in range(prompt, T):
        logits, cache = step(model, tokens[:, t : t + 1], cache)
        outs.append(logits)
    np.testing.assert_allclose(jnp.concatenate(outs, 1), full, atol=1e-4, rtol=1e-4)
    assert int(cache["index"]) == T


def _with_id_0(seed):
    """Tokens `[B, T]` with id 0 (a real token) at position 2 of every row and 4 of row 1."""
    tokens = np.random.default_rng(seed).integers(1, V, (B, T))
    tokens[:, 2], tokens[1, 4] = 0, 0
    return tokens


def _cached(model, tokens, start=None, prompt=3):
    """Logits `[B, T, V]` through the KV cache: `prompt` tokens in one call, then one per call."""
    step = jax.jit(lambda m, tok, c: m.decode_step(tok, c))
    logits, cache = step(model, tokens[:, :prompt], model.init_cache(B, T, start))
    outs = [logits]
    for t in range(prompt, T):
        logits, cache = step(model, tokens[:, t : t + 1], cache)
        outs.append(logits)
    return jnp.concatenate(outs, 1)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
def test_id_0_is_attended_like_any_token_and_only_the_mask_hides_it(positional):
    model = _model(positional=positional)
    tokens = jnp.asarray(_with_id_0(5))
    full = model(tokens)
    np.testing.assert_allclose(full, _cached(model, tokens), atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(
        model(tokens, attention_mask=jnp.ones((B, T), bool)), full, atol=1e-6
    )
    hidden = model(tokens, attention_mask=tokens != 0)  # the mask, not the id, says padding
    np.testing.assert_allclose(hidden[:, :2], full[:, :2], atol=1e-6)  # before the first 0
    assert not np.allclose(hidden[:, 3:], full[:, 3:], atol=1e-3)


def test_right_padding_the_full_pass_equals_cached_decoding_and_the_rows_alone():
    model = _model()
    lengths = np.array([T, 5, 3])
    real = np.arange(T) < lengths[:, None]
    tokens = _with_id_0(6)
    other = np.where(real, tokens, np.random.default_rng(7).integers(0, V, (B, T)))
    full = model(jnp.asarray(tokens), attention_mask=jnp.asarray(real))
    np.testing.assert_allclose(
        model(jnp.asarray(other), attention_mask=jnp.asarray(real))[real], full[real], atol=1e-6
    )  # what the padding holds changes nothing
    np.testing.assert_allclose(model(jnp.asarray(tokens))[real], full[real], atol=1e-6)
    np.testing.assert_allclose(
        _cached(model, jnp.asarray(tokens))[real], full[real], atol=1e-5, rtol=1e-5
    )
    for b, n in enumerate(lengths):
        alone = model(jnp.asarray(tokens[b : b + 1, :n]))
        np.testing.assert_allclose(full[b, :n], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("positional", ["learned", "sinusoidal"])
def test_left_padding_the_full_pass_equals_cached_decoding_from_start(positional):
    model = _model(positional=positional)
    start = np.array([0, 2, 4])  # left padding per row: prompts of 7, 5 and 3 tokens
    real = np.arange(T) >= start[:, None]
    tokens = _with_id_0(8)
    tokens[~real] = np.random.default_rng(9).integers(0, V, (~real).sum())  # any ids
    full = model(jnp.asarray(tokens), attention_mask=jnp.asarray(real))
    cached = _cached(model, jnp.asarray(tokens), jnp.asarray(start))
    np.testing.assert_allclose(cached[real], full[real], atol=1e-5, rtol=1e-5)
    for b, s in enumerate(start):
        alone = model(jnp.asarray(tokens[b : b + 1, s:]))
        np.testing.assert_allclose(full[b, s:], alone[0], atol=1e-5, rtol=1e-5)


def test_bad_config_and_inputs_are_refused_with_the_field():
    with pytest.raises(ValueError, match="DecoderOnlyConfig.num_layers must be a positive"):
        DecoderOnlyConfig.tiny(num_layers=0)
    with pytest.raises(ValueError, match="DecoderOnlyConfig.activation='swish' is not one of"):
        DecoderOnlyConfig.tiny(activation="swish")
    model = _model()
    with pytest.raises(ValueError, match="exceed the learned positions"):
        model(_tokens(0, 17))
    with pytest.raises(ValueError, match="max_len=40 exceeds"):
        model.init_cache(B, 40)
    with pytest.raises(ValueError, match="needs rng"):
        model(_tokens(), deterministic=False)


def _next_token_loss(model, batch, rng, deterministic):
    """Causal LM loss over every position (a stand-in for the LM task of issue 10)."""
    logits = model(batch["tokens"][:, :-1], rng=rng, deterministic=deterministic)
    targets = batch["tokens"][:, 1:]
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    return nll.sum(), {"loss_sum": nll.sum(), "tokens": jnp.float32(nll.size)}


def test_registry_and_the_generic_train_step_train_it_on_8_devices():
    section = models.config_section("decoder_only", "tiny", dropout_rate=0.1)
    assert section.vocab_size is None and section.max_len == 64
    cfg = models.build_config(section, {"vocab_size": 12})
    assert isinstance(cfg, DecoderOnlyConfig) and cfg.vocab_size == 12
    mesh = shd.make_mesh({"data": -1})
    tx, _ = make_optimizer(cfg.d_model, warmup_steps=5, lr_factor=2.0)
    graphdef, state, shardings = create_train_state(cfg, tx, mesh, seed=0)
    train_fn, eval_fn = ts.compile_steps(graphdef, tx, shardings, mesh, loss_fn=_next_token_loss)
    pattern = np.tile(np.arange(4, 12), 3)[None, :17]  # a cycle the model can learn
    batch = ts.global_batch({"tokens": np.repeat(pattern, 8, 0).astype(np.int32)}, mesh)
    first = float(eval_fn(state.params, batch)["loss_sum"])
    for _ in range(30):
        state, _ = train_fn(state, batch, jax.random.key(0))
    assert float(eval_fn(state.params, batch)["loss_sum"]) < 0.3 * first
