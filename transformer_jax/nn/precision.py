"""A matrix product with float32 output whose backward pass multiplies in the inputs' dtype.

For 16-bit computation, the logits over the vocabulary and the attention scores are asked for
in float32 (`preferred_element_type`): the softmax and the loss need the range and the
accumulation. JAX's transpose of such a product then multiplies the float32 cotangent by the
16-bit operands converted to float32, and a float32 product runs at TF32 (GPUs) or a fraction of
the bfloat16 rate: about half of the head's FLOPs at half speed. `einsum_f32_out` keeps the
forward product and rounds the cotangent to the operands' dtype first, so both backward products
run on 16-bit operands with float32 accumulation, as the forward does; float32 inputs take the
plain product (the same program as `jnp.einsum`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float


def einsum_f32_out(
    equation: str, x: Float[Array, "*x"], w: Float[Array | np.ndarray, "*w"]
) -> Array:
    """`jnp.einsum(equation, x, w.astype(x.dtype), preferred_element_type=float32)`.

    Args:
      equation: two operands, each letter at most once per operand, every output letter in an
        operand (e.g. "BLD,VD->BLV").
      x: the activations; their dtype is the computation's.
      w: weights (or a second activation), cast to `x.dtype`; their gradient is returned in
        their own dtype (a float32 parameter's, accumulated in float32, not rounded to 16 bits).

    Returns:
      The product in float32. Gradients: with 16-bit `x`, products of the cotangent rounded to
      `x.dtype` and accumulated in float32; with float32 `x`, JAX's own.
    """
    if jnp.dtype(x.dtype).itemsize >= 4:
        return jnp.einsum(equation, x, w.astype(x.dtype), preferred_element_type=jnp.float32)
    return _low_precision_backward(equation, x, w)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _low_precision_backward(equation, x, w):
    return jnp.einsum(equation, x, w.astype(x.dtype), preferred_element_type=jnp.float32)


def _forward(equation, x, w):
    return _low_precision_backward(equation, x, w), (x, w)


def _backward(equation, residuals, g):
    x, w = residuals
    inputs, out = equation.replace(" ", "").split("->")
    x_axes, w_axes = inputs.split(",")
    g = g.astype(x.dtype)
    dx = jnp.einsum(
        f"{out},{w_axes}->{x_axes}", g, w.astype(x.dtype), preferred_element_type=jnp.float32
    )
    dw = jnp.einsum(f"{out},{x_axes}->{w_axes}", g, x, preferred_element_type=jnp.float32)
    return dx.astype(x.dtype), dw.astype(w.dtype)


_low_precision_backward.defvjp(_forward, _backward)
