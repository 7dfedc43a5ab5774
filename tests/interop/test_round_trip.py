"""Workdir -> Hugging Face folder -> workdir gives the same parameters and outputs, for the GPT,
BERT and ViT models; fields a Hugging Face class cannot hold are refused by name."""

import dataclasses
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax import interop, models
from transformer_jax.interop import convert
from transformer_jax.interop.tensors import flat_params
from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.models.encoder_only.config import EncoderOnlyConfig
from transformer_jax.models.vit.config import VitConfig

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"


def random_params(cfg, seed: int):
    """Every parameter random (LayerNorms and biases included), so a swapped axis shows."""
    _, abstract = models.abstract_model(cfg)
    leaves, treedef = jax.tree.flatten(abstract)
    rng = np.random.default_rng(seed)
    values = [rng.normal(0, 0.3, leaf.shape).astype(np.float32) for leaf in leaves]
    return jax.tree.unflatten(treedef, values)


TASKS = {"gpt": "language_model", "bert": "bert_pretrain", "vit": "image_classify"}


def workdir_of(kind, cfg, tokenizer, tmp_path, seed=0):
    """A workdir holding `cfg` with random parameters (as an import writes it)."""
    converted = interop.Converted(
        model_type="test", architecture="test", cfg=cfg, params=random_params(cfg, seed),
        tokenizer=tokenizer, task=TASKS[kind], labels=None, fresh=[], dropped={},
    )  # fmt: skip
    return convert.write_workdir(converted, tmp_path / "before", "test").path, converted


def tokenizer_of(name: str):
    return interop.read_hf(FIXTURES / name).tokenizer


def same_params(a, b, unexported=()):
    """Equal parameters but those under `unexported` (heads the exported class lacks)."""
    fa, fb = flat_params(a), flat_params(b)
    fa = {k: v for k, v in fa.items() if not k.startswith(unexported)}
    fb = {k: v for k, v in fb.items() if not k.startswith(unexported)}
    assert sorted(fa) == sorted(fb)
    for key in fa:
        np.testing.assert_array_equal(fa[key], fb[key], err_msg=key)


CASES = {
    "gpt": lambda tok: DecoderOnlyConfig(
        vocab_size=tok.vocab_size, num_layers=2, d_model=24, num_heads=3, d_ff=40, max_len=20,
        pad_id=tok.eos_id,
    ),
    "bert": lambda tok: EncoderOnlyConfig(
        vocab_size=tok.vocab_size, num_layers=2, d_model=20, num_heads=4, d_ff=36, max_len=24
    ),
    "vit": lambda tok: VitConfig(
        num_classes=5, image_height=12, image_width=12, channels=3, patch_size=4,
        num_layers=2, d_model=16, num_heads=2, d_ff=28,
    ),
}  # fmt: skip
TOKENIZERS = {"gpt": "gpt2", "bert": "bert_pretraining", "vit": None}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_round_trip_keeps_parameters(kind, tmp_path):
    tokenizer = tokenizer_of(TOKENIZERS[kind]) if TOKENIZERS[kind] else None
    cfg = CASES[kind](tokenizer)
    before, converted = workdir_of(kind, cfg, tokenizer, tmp_path)
    architecture = convert.to_hf(before, tmp_path / "hf")
    hf_config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf_config["architectures"] == [architecture]
    back = interop.read_hf(tmp_path / "hf")
    assert back.cfg == dataclasses.replace(
        cfg,
        dropout_rate=back.cfg.dropout_rate,
        attention_dropout_rate=back.cfg.attention_dropout_rate,
    )
    # BertForPreTraining has no sequence or token classifier: they come back newly initialised.
    same_params(converted.params, back.params, ("sequence_head", "token_head"))
    if tokenizer is not None:
        assert back.tokenizer.encode("The cat sat.") == tokenizer.encode("The cat sat.")


def test_gpt_with_sinusoidal_positions_exports_them_as_a_table(tmp_path):
    tokenizer = tokenizer_of("gpt2")
    cfg = dataclasses.replace(CASES["gpt"](tokenizer), positional="sinusoidal")
    before, converted = workdir_of("gpt", cfg, tokenizer, tmp_path)
    convert.to_hf(before, tmp_path / "hf")
    back = interop.read_hf(tmp_path / "hf")
    graphdef, _ = models.abstract_model(cfg)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 20)))
    want = nnx.merge(graphdef, converted.params)(tokens)
    got = nnx.merge(models.abstract_model(back.cfg)[0], back.params)(tokens)
    assert np.abs(np.asarray(want) - np.asarray(got)).max() < 1e-5


@pytest.mark.parametrize(
    "kind, field, value",
    [
        ("bert", "norm", "pre"),
        ("bert", "pool", "mean"),
        ("gpt", "norm", "post"),
        ("vit", "pool", "gap"),
        ("vit", "stem_layers", 1),
    ],
)
def test_unexportable_fields_are_named(kind, field, value, tmp_path):
    tokenizer = tokenizer_of(TOKENIZERS[kind]) if TOKENIZERS[kind] else None
    cfg = dataclasses.replace(CASES[kind](tokenizer), **{field: value})
    before, _ = workdir_of(kind, cfg, tokenizer, tmp_path)
    with pytest.raises(interop.ConversionError, match=field):
        convert.to_hf(before, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_a_classifier_exports_as_sequence_classification(tmp_path):
    """A `classify` workdir (here a converted one) -> BertForSequenceClassification with its
    labels -> the same encoder, pooler and classifier."""
    interop.from_hf(FIXTURES / "bert_sequence", tmp_path / "workdir")
    assert convert.to_hf(tmp_path / "workdir", tmp_path / "hf") == "BertForSequenceClassification"
    hf = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    before, after = interop.read_hf(FIXTURES / "bert_sequence"), interop.read_hf(tmp_path / "hf")
    assert after.labels == before.labels and after.task == "classify"
    same_params(before.params, after.params, ("mlm", "nsp_head", "token_head"))
