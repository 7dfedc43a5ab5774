"""The vocabulary padded for the output products on GPUs: the same logits, loss and
gradients as unpadded, parameters of the real vocabulary's shape, nothing padded on CPUs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig
from transformer_jax.models.registry import build_model
from transformer_jax.nn import layers
from transformer_jax.tasks.losses import token_metrics


@pytest.mark.parametrize(
    "vocab, platform, padded",
    [
        (50257, "gpu", 50304),
        (30522, "gpu", 30592),
        (256, "gpu", 256),
        (50257, "cpu", 50257),
        (30522, "tpu", 30522),
    ],
)
def test_padded_vocab(vocab, platform, padded):
    assert layers.padded_vocab(vocab, platform) == padded


TOKENS = jnp.array([[5, 9, 3, 7, 2, 1, 57], [4, 4, 8, 1, 6, 3, 2]])


def _loss_and_grads(config):
    model = build_model(config, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)

    def loss(params):
        m = nnx.merge(graphdef, params)
        if isinstance(config, EncoderDecoderConfig):
            logits = m(TOKENS, TOKENS[:, ::-1])
        else:
            logits = m(TOKENS)
        return token_metrics(logits, TOKENS, jnp.ones(TOKENS.shape))["loss_sum"], logits

    (value, logits), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    return value, logits, grads


@pytest.mark.parametrize(
    "config",
    [
        DecoderOnlyConfig.tiny(vocab_size=61),
        EncoderDecoderConfig.tiny(vocab_size=61, tie_output=False),
    ],
    ids=["tied table", "untied kernel"],
)
def test_padding_changes_no_figure(config, monkeypatch):
    """Padded to 64 here (as a GPU would to 128): the logits keep 61 columns, and the loss,
    logits and every gradient (of the same parameter shapes) equal the unpadded ones to
    float32 rounding."""
    want = _loss_and_grads(config)
    monkeypatch.setitem(layers.VOCAB_MULTIPLE, "cpu", 64)
    assert layers.padded_vocab(61) == 64
    got = _loss_and_grads(config)
    assert got[1].shape == want[1].shape == (2, 7, 61)
    assert jax.tree.structure(got[2]) == jax.tree.structure(want[2])
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert a.shape == b.shape
        scale = float(np.max(np.abs(b)))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * scale + 1e-30)
