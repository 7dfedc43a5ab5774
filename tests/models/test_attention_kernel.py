"""Every model computes the same function with the attention kernel as with the reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.encoder_decoder.config import TransformerConfig
from transformer_jax.models.encoder_only.config import EncoderOnlyConfig
from transformer_jax.models.registry import build_model
from transformer_jax.models.vit.config import VitConfig

TOKENS = jnp.array([[5, 9, 3, 7, 2, 0, 0], [4, 4, 8, 1, 6, 3, 2]])  # Row 0 is padded.
IMAGES = jax.random.normal(jax.random.key(3), (2, 8, 8, 1))


def _forward(name):
    """(config class preset, a forward pass of the model on fixed inputs)."""
    return {
        "encoder_decoder": (
            TransformerConfig.tiny,
            lambda m, **kw: m(TOKENS, TOKENS[:, ::-1], **kw),
        ),
        "decoder_only": (DecoderOnlyConfig.tiny, lambda m, **kw: m(TOKENS, **kw)),
        "encoder_only": (EncoderOnlyConfig.tiny, lambda m, **kw: m(TOKENS, **kw)),
        "vit": (VitConfig.tiny, lambda m, **kw: m(IMAGES, **kw)),
    }[name]


@pytest.mark.parametrize("name", ["encoder_decoder", "decoder_only", "encoder_only", "vit"])
def test_kernel_model_equals_reference_model(name):
    """Same parameters, dropout on the residuals (same key): outputs and parameter gradients of
    attention_kernel="xla" equal those of "reference" to float32 rounding."""
    preset, forward = _forward(name)
    models = {
        kernel: build_model(preset(attention_kernel=kernel, dropout_rate=0.1), rngs=nnx.Rngs(0))
        for kernel in ("reference", "xla")
    }
    graphdef, params = nnx.split(models["reference"], nnx.Param)

    def loss(params, kernel):
        model = nnx.merge(nnx.graphdef(models[kernel]), params)
        out = forward(model, rng=jax.random.key(1), deterministic=False)
        return jnp.sum(jnp.tanh(out)), out

    results = {k: jax.value_and_grad(loss, has_aux=True)(params, k) for k in models}
    (_, ref_out), ref_grads = results["reference"]
    (_, out), grads = results["xla"]
    np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=1e-5)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_attention_weights_still_returned_with_a_kernel():
    """Asking for the attention maps runs the reference equation, whatever the kernel."""
    model = build_model(DecoderOnlyConfig.tiny(attention_kernel="xla"), rngs=nnx.Rngs(0))
    logits, weights = model(TOKENS, return_attention=True)
    assert len(weights) == 2 and weights[0].shape == (2, 4, 7, 7)
    np.testing.assert_allclose(weights[0].sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(logits, model(TOKENS), rtol=1e-5, atol=1e-5)
