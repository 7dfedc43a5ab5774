"""Names kept for one release: each old name still imports, is the very object of its new name,
and warns (DeprecationWarning) with the import to write instead, at the caller's line."""

import subprocess
import sys

import pytest

import transformer_jax
import transformer_jax.data
from transformer_jax import EncoderDecoder, EncoderDecoderConfig
from transformer_jax.data import translation
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


# What `transformer_jax.data` served when translation was its only task.
TRANSLATION_NAMES = """BATCH_KEYS PACKED_KEYS EvalBatches TokenizedPairs TrainIterator
bucket_lengths build_batch default_data_config embedded_pairs filter_by_length get_pairs
load_tokenizer_or_train make_eval_batches make_train_iterator number_pairs padded_batch
read_aligned read_shard read_tsv sample_integers shard_range tokenize_pairs tokenized_split
validate_data_config""".split()


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


@pytest.mark.parametrize("name", TRANSLATION_NAMES)
def test_translation_names_from_data_warn_and_are_the_translation_packages(name):
    with pytest.warns(
        DeprecationWarning, match=f"transformer_jax.data.{name} is deprecated"
    ) as record:
        assert _import("transformer_jax.data", name) is getattr(translation, name)
    assert all(
        f"from transformer_jax.data.translation import {name}" in str(w.message) for w in record
    )


def test_old_names_stay_out_of_all():
    assert {"Transformer", "TransformerConfig"}.isdisjoint(transformer_jax.__all__)
    assert set(TRANSLATION_NAMES).isdisjoint(transformer_jax.data.__all__)


def test_importing_data_loads_no_pipeline_until_an_old_name_is_used():
    code = (
        "import sys, warnings; import transformer_jax.data as data; "
        "before = [m for m in ('transformer_jax.data.translation', 'grain') if m in sys.modules]; "
        "warnings.simplefilter('ignore'); data.get_pairs; "
        "print(before, 'transformer_jax.data.translation' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[] True"


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
