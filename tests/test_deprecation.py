"""Names kept for one release: each old name still imports, is the very object of its new name,
and warns (DeprecationWarning) with the import to write instead, at the caller's line."""

import pytest

import transformer_jax
from transformer_jax import EncoderDecoder, EncoderDecoderConfig
from transformer_jax.deprecation import deprecated_names

# (module, old name, the object it must be, the new import the warning must name).
RENAMED_MODELS = [
    (
        "transformer_jax",
        "Transformer",
        EncoderDecoder,
        "from transformer_jax import EncoderDecoder",
    ),
    (
        "transformer_jax",
        "TransformerConfig",
        EncoderDecoderConfig,
        "from transformer_jax import EncoderDecoderConfig",
    ),
    (
        "transformer_jax.models.encoder_decoder",
        "Transformer",
        EncoderDecoder,
        "from transformer_jax.models.encoder_decoder import EncoderDecoder",
    ),
    (
        "transformer_jax.models.encoder_decoder",
        "TransformerConfig",
        EncoderDecoderConfig,
        "from transformer_jax.models.encoder_decoder import EncoderDecoderConfig",
    ),
    (
        "transformer_jax.models.encoder_decoder.model",
        "Transformer",
        EncoderDecoder,
        "from transformer_jax.models.encoder_decoder.model import EncoderDecoder",
    ),
    (
        "transformer_jax.models.encoder_decoder.config",
        "TransformerConfig",
        EncoderDecoderConfig,
        "from transformer_jax.models.encoder_decoder.config import EncoderDecoderConfig",
    ),
]


def _import(module: str, name: str) -> object:
    """`from module import name`, as a caller writes it."""
    namespace: dict = {}
    exec(f"from {module} import {name}", namespace)
    return namespace[name]


@pytest.mark.parametrize("module, old, new, new_import", RENAMED_MODELS)
def test_old_model_names_warn_and_are_the_new_classes(module, old, new, new_import):
    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is deprecated") as record:
        assert _import(module, old) is new
    assert all(new_import in str(w.message) for w in record)


def test_old_names_stay_out_of_all():
    assert "Transformer" not in transformer_jax.__all__
    assert "TransformerConfig" not in transformer_jax.__all__


def test_warning_points_at_the_callers_line():
    with pytest.warns(DeprecationWarning) as record:
        old = transformer_jax.Transformer
    assert old is EncoderDecoder
    assert record[0].filename == __file__


def test_unknown_names_still_raise_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'Transformers'"):
        _ = transformer_jax.Transformers
    getattr_ = deprecated_names("pkg", {"old": "transformer_jax.EncoderDecoder"})
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'other'"):
        getattr_("other")
