"""transformer_jax: the Transformer of "Attention Is All You Need" in JAX and Flax NNX."""

from transformer_jax.attention import (
    causal_mask,
    combine_masks,
    dot_product_attention,
    dot_product_attention_weights,
    padding_mask,
    segment_mask,
)
from transformer_jax.config import TransformerConfig
from transformer_jax.model import Transformer, count_params
from transformer_jax.positional import sinusoidal_encoding

__all__ = [
    "Transformer",
    "TransformerConfig",
    "causal_mask",
    "combine_masks",
    "count_params",
    "dot_product_attention",
    "dot_product_attention_weights",
    "padding_mask",
    "segment_mask",
    "sinusoidal_encoding",
]
