"""The model family. Each model lives in its own package next to its config and presets, and
registers itself here under the name a training config gives in `config.model.name`."""

from transformer_jax.models import decoder_only, encoder_decoder, encoder_only, vit
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
register(
    ModelSpec(
        name="decoder_only",
        config_class=decoder_only.DecoderOnlyConfig,
        module_class=decoder_only.DecoderOnly,
        data_fields=("vocab_size",),  # From the tokenizer; max_len is the model's context.
    )
)
register(
    ModelSpec(
        name="encoder_only",
        config_class=encoder_only.EncoderOnlyConfig,
        module_class=encoder_only.EncoderOnly,
        data_fields=("vocab_size", "num_labels"),  # Tokenizer; labels of a classification task.
    )
)
register(
    ModelSpec(
        name="vit",
        config_class=vit.VitConfig,
        module_class=vit.VisionTransformer,
        # From the images: their classes, size and channels.
        data_fields=("num_classes", "image_height", "image_width", "channels"),
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
