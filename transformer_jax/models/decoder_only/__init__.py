"""The decoder-only language model (GPT), its config and the GPT-1 / GPT-2 presets."""

from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.decoder_only.model import DecoderOnly

__all__ = ["DecoderOnly", "DecoderOnlyConfig"]
