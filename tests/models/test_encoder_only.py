"""The encoder-only model (BERT): BERT-base's size from abstract shapes, bidirectional attention
under the caller's padding mask (never one read from token ids), segment embeddings, and the
pooler and heads (toward issue 11)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax import models
from transformer_jax.models.encoder_only import EncoderOnly, EncoderOnlyConfig

# All different: batch 3, length 7, heads 2, head dim 6, vocab 19, labels 5.
B, T, N, HD, V, K = 3, 7, 2, 6, 19, 5


def _model(**kw):
    cfg = EncoderOnlyConfig.tiny(
        vocab_size=V, d_model=N * HD, num_heads=N, max_len=16, num_labels=K, **kw
    )
    return EncoderOnly(cfg, rngs=nnx.Rngs(0))


def _tokens(seed=0, length=T):
    return jnp.asarray(np.random.default_rng(seed).integers(4, V, (B, length)))


def test_bert_base_size_from_abstract_shapes():
    cfg = EncoderOnlyConfig.bert_base()
    assert (cfg.vocab_size, cfg.max_len, cfg.type_vocab_size) == (30522, 512, 2)
    assert (cfg.num_layers, cfg.d_model, cfg.num_heads, cfg.d_ff) == (12, 768, 12, 3072)
    # BERT-base's encoder with its pooler has 109,482,240 parameters; ours lack the 12 x 768 key
    # biases (zero gradient, see MultiHeadAttention) and add the heads: MLM transform 590,592,
    # its LayerNorm 1,536, its output bias 30,522, and three 2-way heads of 1,538 each.
    heads = 768 * 768 + 768 + 2 * 768 + 30522 + 3 * (768 * 2 + 2)
    assert models.count_params(cfg) == 109_482_240 - 12 * 768 + heads
    assert round(models.count_params(cfg) / 1e6) == 110


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_shapes_and_bidirectional_attention(norm):
    model = _model(norm=norm)
    tokens = _tokens()
    hidden, weights = model(tokens, return_attention=True)
    assert hidden.shape == (B, T, N * HD) and len(weights) == 2
    assert weights[0].shape == (B, N, T, T)
    changed = model(tokens.at[:, -1].set(4))
    assert not np.allclose(changed[:, 0], hidden[:, 0], atol=1e-5)  # the first sees the last
    pooled = model.pool(hidden)
    assert pooled.shape == (B, N * HD) and float(jnp.abs(pooled).max()) <= 1.0
    assert model.mlm_logits(hidden).shape == (B, T, V)
    assert model.nsp_logits(pooled).shape == (B, 2)
    assert model.classify(pooled).shape == (B, K)
    assert model.token_logits(hidden).shape == (B, T, K)


def test_masked_padding_is_never_attended_to_whatever_ids_it_holds():
    model = _model()
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, V, (B, T + 4))  # id 0 is a token like any other
    lengths = np.array([T, 4, 6])
    real = np.arange(T + 4) < lengths[:, None]
    segments = np.where(np.arange(T + 4) < 2, 0, 1) * real
    hidden = model(jnp.asarray(tokens), jnp.asarray(segments), attention_mask=jnp.asarray(real))
    other = np.where(real, tokens, rng.integers(0, V, tokens.shape))
    np.testing.assert_allclose(
        model(jnp.asarray(other), jnp.asarray(segments), attention_mask=jnp.asarray(real))[real],
        hidden[real],
        atol=1e-6,
    )
    for b, n in enumerate(lengths):
        alone = model(jnp.asarray(tokens[b : b + 1, :n]), jnp.asarray(segments[b : b + 1, :n]))
        np.testing.assert_allclose(hidden[b, :n], alone[0], atol=1e-5, rtol=1e-5)


def test_id_0_inside_a_row_is_attended_and_only_the_mask_hides_it():
    model = _model()
    tokens = _tokens(2).at[:, 3].set(0).at[:, -1].set(0)
    hidden = model(tokens)
    # A trailing 0 is a token, not padding: the rows without it read differently.
    assert not np.allclose(hidden[:, :-1], model(tokens[:, :-1]), atol=1e-4)
    np.testing.assert_allclose(
        model(tokens, attention_mask=jnp.ones((B, T), bool)), hidden, atol=1e-6
    )
    masked = model(tokens, attention_mask=tokens != 0)
    assert not np.allclose(masked[:, 0], hidden[:, 0], atol=1e-4)
    rest = tokens[:, :-1]  # masked, the trailing 0 is padding: the rows without it read alike
    np.testing.assert_allclose(masked[:, :-1], model(rest, attention_mask=rest != 0), atol=1e-5)


def test_segments_change_the_input():
    model = _model()
    tokens = _tokens()
    segments = jnp.broadcast_to(jnp.arange(T) >= 3, (B, T)).astype(jnp.int32)
    assert not np.allclose(model(tokens, segments), model(tokens), atol=1e-4)
    np.testing.assert_allclose(model(tokens, jnp.zeros_like(tokens)), model(tokens), atol=1e-6)


def test_mlm_output_is_tied_to_the_token_embedding_with_its_own_bias():
    model = _model()
    hidden = model(_tokens())
    model.mlm_bias[...] = jnp.arange(V, dtype=jnp.float32)
    h = model.mlm_norm(jax.nn.gelu(model.mlm_transform(hidden), approximate=False))
    expected = jnp.einsum("btd,vd->btv", h, model.embed.embedding[...]) + jnp.arange(V)
    np.testing.assert_allclose(model.mlm_logits(hidden), expected, atol=1e-5)


def test_bad_inputs_are_refused_with_the_limit():
    model = _model()
    with pytest.raises(ValueError, match="max_len=16"):
        model(_tokens(length=17))
    with pytest.raises(ValueError, match="needs rng"):
        model(_tokens(), deterministic=False)
    with pytest.raises(ValueError, match="type_vocab_size"):
        EncoderOnlyConfig.tiny(type_vocab_size=0)
    assert models.get("encoder_only").config_class is EncoderOnlyConfig


def test_mean_pooling_averages_only_the_real_tokens_and_skips_the_pooler():
    model = _model(pool="mean")
    tokens = _tokens()
    real = jnp.ones(tokens.shape, bool).at[0, -3:].set(False)  # row 0 ends in 3 pads
    hidden = model(tokens, attention_mask=real)
    pooled = model.pool(hidden, real)
    np.testing.assert_allclose(pooled[0], hidden[0, :-3].mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(pooled[1], hidden[1].mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(model.pool(hidden), hidden.mean(1), rtol=1e-6, atol=1e-6)


def test_an_unknown_pool_is_named():
    with pytest.raises(ValueError, match="EncoderOnlyConfig.pool='max': use one of 'cls', 'mean'"):
        _model(pool="max")
