"""The mapping tables: for every family, writing our parameters then reading them back gives
them again (parts not kept come back as zeros and are dropped), and every row's shapes agree."""

import numpy as np
import pytest

from transformer_jax.interop import bert, ctranslate2, gpt2, marian, vit
from transformer_jax.interop.files import ConversionError
from transformer_jax.interop.tables import Row, read, repeat, same, write
from transformer_jax.interop.tensors import Source
from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.vit.config import VitConfig

DIMS = {"d": 8, "d3": 24, "n": 2, "h": 4, "f": 12, "v": 11, "p": 6, "t": 2, "two": 2,
        "labels": 3, "tokens": 5, "one": 1, "classes": 4}  # fmt: skip
CTRANSLATE2 = [
    *repeat(ctranslate2.ENCODER_LAYER, "encoder/layers/{i}/", "encoder.layer.{i}.", 2),
    *repeat(ctranslate2.DECODER_LAYER, "decoder/layers/{i}/", "decoder.layer.{i}.", 2),
]
TABLES = {
    "bert": [*bert.body(2), *bert.POOLER, *bert.MLM, *bert.NSP, *bert.CLASSIFIER],
    "vit": [*vit.body(VitConfig(num_layers=2, d_model=8, num_heads=2, d_ff=12)),
            *vit.CLASSIFIER],
    "gpt2": gpt2.body(DecoderOnlyConfig(vocab_size=11, num_layers=2, d_model=8,
                                             num_heads=2, d_ff=12, max_len=6)),
    "marian": [*repeat(marian.ENCODER_LAYER, "encoder/layers/{i}/", "e.{i}.", 2),
               *repeat(marian.DECODER_LAYER, "decoder/layers/{i}/", "d.{i}.", 2)],
    "ctranslate2": CTRANSLATE2,
}  # fmt: skip


def _ours(rows: list[Row], rng) -> dict[str, np.ndarray]:
    """Random values for every parameter the rows keep, of their shapes."""
    return {
        path: rng.normal(size=shape(DIMS)).astype(np.float32)
        for row in rows
        for path, shape in zip(row.ours, row.parts, strict=True)
        if path
    }


@pytest.mark.parametrize("family", TABLES)
def test_write_then_read_gives_our_parameters_back(family):
    rows, rng = TABLES[family], np.random.default_rng(0)
    ours = _ours(rows, rng)
    theirs = write(ours, rows, DIMS)
    assert len(theirs) == len(rows), "two rows write one tensor"
    for row in rows:
        assert theirs[row.theirs].shape == row.shape(DIMS), row.theirs
    back = read(Source(theirs, "test"), rows, DIMS)
    assert back.keys() == ours.keys()
    for path, value in ours.items():
        np.testing.assert_array_equal(back[path], value, err_msg=path)


def test_a_part_not_kept_is_written_as_zeros_and_read_back_dropped():
    key_bias = bert.BERT_LAYER[3]  # attention.self.key.bias: the key bias is not kept.
    assert key_bias.ours == ("",) and key_bias.theirs.endswith("key.bias")
    theirs = write({}, [key_bias], DIMS)
    np.testing.assert_array_equal(theirs[key_bias.theirs], np.zeros(8, np.float32))
    assert read(Source(theirs, "test"), [key_bias], DIMS) == {}


def test_used_names_every_parameter_written_from():
    rows = [same("a", "x.weight", "d"), same("b_bias", "y.bias", "d")]
    used = set()
    write({"a": np.ones(8, np.float32)}, rows, DIMS, used)  # No bias: zeros, not used.
    assert used == {"a"}


def test_a_missing_parameter_that_is_not_a_bias_is_an_error():
    with pytest.raises(ConversionError, match="x.weight: the model has no parameter 'a'"):
        write({}, [same("a", "x.weight", "d")], DIMS)
