"""The paper's encoder-decoder Transformer, its config and the Table 3 presets."""

from transformer_jax.deprecation import deprecated_names
from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig
from transformer_jax.models.encoder_decoder.model import EncoderDecoder

# The names from when translation was the only task; they go in the next release.
__getattr__ = deprecated_names(
    __name__,
    {
        "Transformer": f"{__name__}.EncoderDecoder",
        "TransformerConfig": f"{__name__}.EncoderDecoderConfig",
    },
)

__all__ = ["EncoderDecoder", "EncoderDecoderConfig"]
