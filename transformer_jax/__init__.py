"""transformer_jax: the Transformer of "Attention Is All You Need" in JAX and Flax NNX.

Layers: `nn` (building blocks) -> `models` (the family, by name) -> `inference` (decoding,
loading, `Translator`, `Generator`, `MaskFiller`, `Classifier`, `Embedder`,
`ImageClassifier`) -> `tasks` (data, loss, evaluation) -> `training` (the loop) -> `cli` (the
command lines, and the `transformer-jax` console command).
"""

from transformer_jax.deprecation import deprecated_names
from transformer_jax.inference import (
    Classifier,
    Embedder,
    Generator,
    ImageClassifier,
    MaskFiller,
    Translator,
    beam_search,
    greedy_decode,
    length_penalty,
    sample,
)
from transformer_jax.libtpu_env import quiet_libtpu
from transformer_jax.models import count_params
from transformer_jax.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer_jax.models.encoder_decoder import EncoderDecoder, EncoderDecoderConfig
from transformer_jax.models.encoder_only import EncoderOnly, EncoderOnlyConfig
from transformer_jax.models.vit import VisionTransformer, VitConfig
from transformer_jax.nn import (
    causal_mask,
    combine_masks,
    dot_product_attention,
    dot_product_attention_weights,
    key_mask,
    padding_mask,
    segment_mask,
    sinusoidal_encoding,
)

quiet_libtpu()  # Before any JAX backend starts (importing starts none): see libtpu_env.

# The names from when translation was the only task; they go in the next release.
__getattr__ = deprecated_names(
    __name__,
    {
        "Transformer": f"{__name__}.EncoderDecoder",
        "TransformerConfig": f"{__name__}.EncoderDecoderConfig",
    },
)

__all__ = [
    "Classifier",
    "DecoderOnly",
    "DecoderOnlyConfig",
    "Embedder",
    "EncoderDecoder",
    "EncoderDecoderConfig",
    "EncoderOnly",
    "EncoderOnlyConfig",
    "Generator",
    "ImageClassifier",
    "MaskFiller",
    "Translator",
    "VisionTransformer",
    "VitConfig",
    "beam_search",
    "causal_mask",
    "combine_masks",
    "count_params",
    "dot_product_attention",
    "dot_product_attention_weights",
    "greedy_decode",
    "key_mask",
    "length_penalty",
    "padding_mask",
    "sample",
    "segment_mask",
    "sinusoidal_encoding",
]
