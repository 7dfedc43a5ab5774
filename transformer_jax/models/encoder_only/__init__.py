"""The encoder-only model (BERT), its config and the BERT-base preset."""

from transformer_jax.models.encoder_only.config import EncoderOnlyConfig
from transformer_jax.models.encoder_only.model import EncoderOnly

__all__ = ["EncoderOnly", "EncoderOnlyConfig"]
