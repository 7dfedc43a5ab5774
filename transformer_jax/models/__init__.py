"""The model family. Each model lives in its own package next to its config and presets, and
registers itself here under the name a training config gives in `config.model.name`."""

from transformer_jax.models import encoder_decoder
from transformer_jax.models.registry import (
    ModelSpec,
    abstract_model,
    build_config,
    build_model,
    canonical_fields,
    config_section,
    count_params,
    get,
    names,
    register,
    spec_of,
)

register(
    ModelSpec(
        name="encoder_decoder",
        config_class=encoder_decoder.TransformerConfig,
        module_class=encoder_decoder.Transformer,
        data_fields=("vocab_size", "max_len"),  # From the tokenizer and config.data.max_len.
    )
)

__all__ = [
    "ModelSpec",
    "abstract_model",
    "build_config",
    "build_model",
    "canonical_fields",
    "config_section",
    "count_params",
    "get",
    "names",
    "register",
    "spec_of",
]
