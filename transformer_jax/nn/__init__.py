"""Building blocks shared by every model: pure attention math, positions, layers and blocks.

No module here knows about a model or a task: models are assembled from `BlockSpec`s.
"""

from transformer_jax.nn.attention import (
    Segments,
    causal_mask,
    combine_masks,
    dot_product_attention,
    dot_product_attention_weights,
    dropout,
    key_mask,
    padding_mask,
    segment_mask,
)
from transformer_jax.nn.blocks import Block, BlockSpec, Stack, fold, unstacked
from transformer_jax.nn.layers import ACTIVATIONS, Embedding, FeedForward, LayerNorm
from transformer_jax.nn.multi_head import (
    KVCache,
    MemoryKV,
    MultiHeadAttention,
    grow_cache,
    reorder_cache,
    repeat_cache,
)
from transformer_jax.nn.positional import sinusoidal_encoding

__all__ = [
    "ACTIVATIONS",
    "Block",
    "BlockSpec",
    "Embedding",
    "FeedForward",
    "KVCache",
    "LayerNorm",
    "MemoryKV",
    "MultiHeadAttention",
    "Segments",
    "Stack",
    "causal_mask",
    "combine_masks",
    "dot_product_attention",
    "dot_product_attention_weights",
    "dropout",
    "fold",
    "key_mask",
    "padding_mask",
    "grow_cache",
    "reorder_cache",
    "repeat_cache",
    "segment_mask",
    "sinusoidal_encoding",
    "unstacked",
]
