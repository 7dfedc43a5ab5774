"""EncoderDecoderConfig presets, validation and parameter counts (Table 3)."""

import pytest

from transformer_jax import EncoderDecoderConfig, count_params


def test_presets_match_table_3():
    base, big = EncoderDecoderConfig.base(), EncoderDecoderConfig.big()
    assert (base.num_encoder_layers, base.d_model, base.d_ff, base.num_heads) == (6, 512, 2048, 8)
    assert base.head_dim == 64 and base.dropout_rate == 0.1
    assert (big.num_encoder_layers, big.d_model, big.d_ff, big.num_heads) == (6, 1024, 4096, 16)
    assert big.head_dim == 64 and big.dropout_rate == 0.3


def test_parameter_counts_from_abstract_shapes():
    """Shared 37k vocabulary, tied embeddings: about 63M (base) and 213M (big), within 5%."""
    base = count_params(EncoderDecoderConfig.base(vocab_size=37000))
    big = count_params(EncoderDecoderConfig.big(vocab_size=37000))
    assert abs(base - 63e6) / 63e6 < 0.05, base
    assert abs(big - 213e6) / 213e6 < 0.05, big


def test_untied_embeddings_add_parameters():
    tied = count_params(EncoderDecoderConfig.tiny(vocab_size=50))
    untied = count_params(EncoderDecoderConfig.tiny(vocab_size=50, share_embeddings=False))
    untied_out = count_params(
        EncoderDecoderConfig.tiny(vocab_size=50, share_embeddings=False, tie_output=False)
    )
    assert untied - tied == 50 * 32
    assert untied_out - untied == 50 * 32


@pytest.mark.parametrize(
    "changes, field",
    [
        (dict(d_model=30, num_heads=4), "d_model=30"),
        (dict(d_model=-8), "d_model"),
        (dict(num_heads=0), "num_heads"),
        (dict(norm="middle"), "norm='middle'"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(dropout_rate=1.5), "dropout_rate"),
        (dict(dtype="int8"), "dtype='int8'"),
        (dict(num_encoder_layers=-1), "num_encoder_layers"),
        (dict(d_model=6, num_heads=2), None),  # fine: 6 is even and divisible
        (dict(d_model=9, num_heads=3), "even"),
    ],
)
def test_invalid_fields_name_field_and_value(changes, field):
    if field is None:
        EncoderDecoderConfig.tiny(**changes)
        return
    with pytest.raises(ValueError, match=field.replace("(", r"\(")):
        EncoderDecoderConfig.tiny(**changes)
