"""The weight mapping of benchmarks/ctranslate2_side_by_side.py: CTranslate2, given our weights,
decodes what we decode. Needs the `bench` extra (ctranslate2); skipped without it."""

import importlib.util
import json
import pathlib

import numpy as np
import pytest

pytest.importorskip("ctranslate2")

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "ctranslate2_side_by_side.py"
_SPEC = importlib.util.spec_from_file_location("ctranslate2_side_by_side", _PATH)
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

# Different sizes everywhere (vocabulary, width, heads, layers per stack) so that a swapped
# or transposed axis cannot pass.
SHAPE = dict(vocab_size=53, d_model=24, num_heads=3, d_ff=40, layers=2)


# Marian's (OPUS-MT) options, which CTranslate2 also converts from Marian checkpoints: positions
# as sines then cosines, SiLU ("swish"), a bias on the logits, LayerNorm eps 1e-5.
MARIAN = dict(
    positional="sinusoidal_halves", activation="silu", logits_bias=True, layer_norm_eps=1e-5
)


@pytest.mark.parametrize(
    "fields",
    [dict(norm="post"), dict(norm="pre"), MARIAN, dict(MARIAN, scale_embeddings=False)],
    ids=["post", "pre", "marian", "marian_unscaled"],
)
def test_same_weights_same_outputs(tmp_path, fields):
    sources = np.random.default_rng(1).integers(4, SHAPE["vocab_size"], (5, 7))
    ours = bench.JaxEngine(SHAPE, 0, tmp_path, sources, **fields)
    theirs = bench.Ct2Engine(tmp_path, sources)
    for method in ("greedy", "beam4"):
        tokens, logp = ours.decode("ours", method, ours.sources, scores=True)
        ct2_tokens, ct2_logp = theirs.decode("f32_intra1", method, theirs.sources, scores=True)
        np.testing.assert_array_equal(tokens, ct2_tokens, err_msg=method)
        # The mean log-prob depends on every logit of every step: a much finer check.
        np.testing.assert_allclose(logp, ct2_logp, atol=1e-4, err_msg=method)


def test_every_exported_weight_is_mapped(tmp_path):
    sources = np.zeros((1, 3), np.int64) + 4
    bench.JaxEngine(SHAPE, 0, tmp_path, sources)
    with np.load(tmp_path / "weights.npz") as f:
        weights = dict(f)
    meta = json.loads((tmp_path / "meta.json").read_text())
    bench.ct2_spec(weights, meta).validate()  # every CTranslate2 variable set
    with pytest.raises(ValueError, match="unmapped"):
        bench.ct2_spec({**weights, "decoder/extra": np.zeros(3, np.float32)}, meta)
