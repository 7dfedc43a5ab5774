"""`einsum_f32_out`: the forward product of `jnp.einsum` with float32 output; a backward pass
whose products take 16-bit operands; and no float32 product left in a bfloat16 model's gradient."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig
from transformer_jax.models.registry import build_model
from transformer_jax.nn.precision import einsum_f32_out
from transformer_jax.tasks.losses import token_metrics

EQUATIONS = {  # The head (tied table, untied kernel) and the attention scores.
    "BLD,VD->BLV": ((3, 5, 16), (11, 16)),
    "BTD,DV->BTV": ((3, 5, 16), (16, 11)),
    "BTNH,BSNH->BNTS": ((3, 5, 2, 8), (3, 7, 2, 8)),
}


def _inputs(equation, dtype):
    x_shape, w_shape = EQUATIONS[equation]
    kx, kw = jax.random.split(jax.random.key(0))
    return jax.random.normal(kx, x_shape).astype(dtype), jax.random.normal(kw, w_shape)


def _loss(f, equation):
    def loss(x, w):  # A cotangent that is not all ones.
        y = f(equation, x, w)
        return jnp.sum(jnp.sin(y) * jnp.arange(y.size).reshape(y.shape) / y.size)

    return loss


def _reference(equation, x, w):
    return jnp.einsum(equation, x, w.astype(x.dtype), preferred_element_type=jnp.float32)


def _dot_operand_types(lowered_text: str) -> list[tuple[str, str]]:
    """(lhs, rhs) element types of every dot_general in a lowered (StableHLO) program."""
    found = re.findall(
        r"stablehlo\.dot_general.*?: \(tensor<[^>]*x(\w+)>, tensor<[^>]*x(\w+)>\)", lowered_text
    )
    assert found, "no dot_general found: the pattern no longer matches jax's StableHLO"
    return found


@pytest.mark.parametrize("equation", EQUATIONS)
def test_float32_is_jnp_einsum_bit_for_bit(equation):
    x, w = _inputs(equation, jnp.float32)
    got = jax.value_and_grad(_loss(einsum_f32_out, equation), (0, 1))(x, w)
    want = jax.value_and_grad(_loss(_reference, equation), (0, 1))(x, w)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("equation", EQUATIONS)
def test_bfloat16_forward_is_exact_and_gradients_are_bfloat16_rounding_away(equation):
    """The forward product is jnp.einsum's; the gradients differ from the float32-cotangent
    ones by the rounding of the cotangent to bfloat16 (2^-8 relative), well inside 2%."""
    x, w = _inputs(equation, jnp.bfloat16)
    np.testing.assert_array_equal(einsum_f32_out(equation, x, w), _reference(equation, x, w))
    got = jax.grad(_loss(einsum_f32_out, equation), (0, 1))(x, w)
    want = jax.grad(_loss(_reference, equation), (0, 1))(x, w)
    assert got[0].dtype == jnp.bfloat16 and got[1].dtype == jnp.float32
    for a, b in zip(got, want, strict=True):
        a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
        assert np.abs(a - b).max() <= 0.02 * np.abs(b).max()


@pytest.mark.parametrize("equation", EQUATIONS)
def test_the_backward_products_take_bfloat16_operands(equation):
    x, w = _inputs(equation, jnp.bfloat16)
    grad = jax.jit(jax.grad(_loss(einsum_f32_out, equation), (0, 1)))
    assert set(_dot_operand_types(grad.lower(x, w).as_text())) == {("bf16", "bf16")}
    plain = jax.jit(jax.grad(_loss(_reference, equation), (0, 1)))  # What the check catches.
    assert ("f32", "f32") in _dot_operand_types(plain.lower(x, w).as_text())


@pytest.mark.parametrize(
    "config",
    [
        DecoderOnlyConfig.tiny(
            dtype="bfloat16", attention_dropout_rate=0.1, attention_kernel="reference"
        ),
        EncoderDecoderConfig.tiny(vocab_size=40, dtype="bfloat16", tie_output=False),
    ],
    ids=["gpt, attention dropout", "encoder-decoder, untied head"],
)
def test_a_bfloat16_models_gradient_has_no_float32_product(config):
    """Every matrix product of the loss's gradient (the head's, the written-out attention's, the
    feed-forward's) multiplies bfloat16 operands."""
    model = build_model(config, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    tokens = jnp.array([[5, 9, 3, 7, 2, 1], [4, 4, 8, 1, 6, 3]])

    def loss(params):
        m = nnx.merge(graphdef, params)
        if isinstance(config, EncoderDecoderConfig):
            logits = m(tokens, tokens, rng=jax.random.key(1), deterministic=False)
        else:
            logits = m(tokens, rng=jax.random.key(1), deterministic=False)
        return token_metrics(logits, tokens, jnp.ones(tokens.shape))["loss_sum"]

    text = jax.jit(jax.grad(loss)).lower(params).as_text()
    assert set(_dot_operand_types(text)) == {("bf16", "bf16")}
