"""The paper's encoder-decoder Transformer, its config and the Table 3 presets."""

from transformer_jax.models.encoder_decoder.config import TransformerConfig
from transformer_jax.models.encoder_decoder.model import Transformer

__all__ = ["Transformer", "TransformerConfig"]
