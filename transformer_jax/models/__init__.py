"""The model family. Each model lives in its own package next to its config and presets, and
registers itself here under the name a training config gives in `config.model.name`."""

from transformer_jax.models import decoder_only, encoder_decoder, encoder_only, vit
from transformer_jax.models.fields import EXECUTION_FIELDS
from transformer_jax.models.registry import (
    ModelSpec,
    abstract_model,
    build_config,
    build_model,
    canonical_fields,
    check_section,
    config_section,
    count_params,
    get,
    names,
    register,
    spec_of,
)


# Stand-ins for the data fields (see ModelSpec): values that pass the config classes' checks.
def _positive(value: object, fallback: int) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if ok else fallback


def _vocabulary(fields: dict) -> dict:
    """A vocabulary just large enough for the section's pad id (a bad one is named anyway)."""
    return {"vocab_size": _positive(fields.get("pad_id"), 0) + 1}


register(
    ModelSpec(
        name="encoder_decoder",
        config_class=encoder_decoder.EncoderDecoderConfig,
        module_class=encoder_decoder.EncoderDecoder,
        data_fields=("vocab_size", "max_len"),  # From the tokenizer and config.data.max_len.
        stand_ins=lambda fields: {**_vocabulary(fields), "max_len": 64},
    )
)
register(
    ModelSpec(
        name="decoder_only",
        config_class=decoder_only.DecoderOnlyConfig,
        module_class=decoder_only.DecoderOnly,
        data_fields=("vocab_size",),  # From the tokenizer; max_len is the model's context.
        stand_ins=_vocabulary,
    )
)
register(
    ModelSpec(
        name="encoder_only",
        config_class=encoder_only.EncoderOnlyConfig,
        module_class=encoder_only.EncoderOnly,
        data_fields=("vocab_size", "num_labels"),  # Tokenizer; labels of a classification task.
        stand_ins=lambda fields: {**_vocabulary(fields), "num_labels": 2},
    )
)
register(
    ModelSpec(
        name="vit",
        config_class=vit.VitConfig,
        module_class=vit.VisionTransformer,
        # From the images: their classes, size and channels.
        data_fields=("num_classes", "image_height", "image_width", "channels"),
        # One patch per image: any valid patch size tiles it.
        stand_ins=lambda fields: dict(
            num_classes=2,
            image_height=_positive(fields.get("patch_size"), 1),
            image_width=_positive(fields.get("patch_size"), 1),
            channels=1,
        ),
    )
)

__all__ = [
    "EXECUTION_FIELDS",
    "ModelSpec",
    "abstract_model",
    "build_config",
    "build_model",
    "canonical_fields",
    "check_section",
    "config_section",
    "count_params",
    "get",
    "names",
    "register",
    "spec_of",
]
