"""transformer_jax: the Transformer of "Attention Is All You Need" in JAX and Flax NNX.

Layers: `nn` (building blocks) -> `models` (the family, by name) -> `runs` (a run's workdir:
written, checked, read; `load_run`) -> `inference` (decoding, `Translator`, `Generator`,
`MaskFiller`, `Classifier`, `Embedder`, `ImageClassifier`) -> `tasks` (data, loss,
evaluation) -> `training` (the loop) -> `cli` (the command lines, and the `transformer-jax`
console command).
"""

import importlib
from typing import no_type_check

from transformer_jax.deprecation import deprecated_names
from transformer_jax.libtpu_env import quiet_libtpu

quiet_libtpu()  # Before any JAX backend starts (importing starts none): see libtpu_env.

# Each public name and the module that defines it. They load on first use (PEP 562), so that
# importing one part of the package (a data pipeline, the run layout) loads only what that part
# imports, not the models and front ends.
_HOMES = {
    "Classifier": "transformer_jax.inference",
    "Embedder": "transformer_jax.inference",
    "Generator": "transformer_jax.inference",
    "ImageClassifier": "transformer_jax.inference",
    "MaskFiller": "transformer_jax.inference",
    "Translator": "transformer_jax.inference",
    "beam_search": "transformer_jax.inference",
    "greedy_decode": "transformer_jax.inference",
    "length_penalty": "transformer_jax.inference",
    "sample": "transformer_jax.inference",
    "count_params": "transformer_jax.models",
    "DecoderOnly": "transformer_jax.models.decoder_only",
    "DecoderOnlyConfig": "transformer_jax.models.decoder_only",
    "EncoderDecoder": "transformer_jax.models.encoder_decoder",
    "EncoderDecoderConfig": "transformer_jax.models.encoder_decoder",
    "EncoderOnly": "transformer_jax.models.encoder_only",
    "EncoderOnlyConfig": "transformer_jax.models.encoder_only",
    "VisionTransformer": "transformer_jax.models.vit",
    "VitConfig": "transformer_jax.models.vit",
    "causal_mask": "transformer_jax.nn",
    "combine_masks": "transformer_jax.nn",
    "dot_product_attention": "transformer_jax.nn",
    "dot_product_attention_weights": "transformer_jax.nn",
    "key_mask": "transformer_jax.nn",
    "padding_mask": "transformer_jax.nn",
    "segment_mask": "transformer_jax.nn",
    "sinusoidal_encoding": "transformer_jax.nn",
}

# The names from when translation was the only task; they go in the next release.
_deprecated = deprecated_names(
    __name__,
    {
        "Transformer": f"{__name__}.EncoderDecoder",
        "TransformerConfig": f"{__name__}.EncoderDecoderConfig",
    },
    stacklevel=3,  # The caller of __getattr__ below.
)


@no_type_check  # No checking frame from the tests' jaxtyping hook (see deprecation.py).
def __getattr__(name: str) -> object:
    """A public name, imported from its home on first use (and then kept here)."""
    if name not in _HOMES:
        return _deprecated(name)
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


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
