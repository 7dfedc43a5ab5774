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
from transformer_jax.decoding import beam_search, greedy_decode, sample
from transformer_jax.model import Transformer, count_params
from transformer_jax.positional import sinusoidal_encoding
from transformer_jax.search import length_penalty
from transformer_jax.translator import Translator  # Loads orbax, data and plots only when used.

__all__ = [
    "Transformer",
    "TransformerConfig",
    "Translator",
    "beam_search",
    "causal_mask",
    "combine_masks",
    "count_params",
    "dot_product_attention",
    "dot_product_attention_weights",
    "greedy_decode",
    "length_penalty",
    "padding_mask",
    "sample",
    "segment_mask",
    "sinusoidal_encoding",
]
