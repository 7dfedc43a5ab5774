"""Imported Hugging Face checkpoints reproduce what `transformers` computed on them.

The fixtures (tests/fixtures/hf, made by make_fixtures.py there) are tiny random checkpoints of
each supported class, every parameter random (key biases and LayerNorms included), with the
outputs `transformers` gave on fixed inputs. Nothing here needs PyTorch.
"""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from transformer_jax import interop, models

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"
TOLERANCE = 1e-5


def reference(name: str) -> tuple[dict, dict]:
    folder = FIXTURES / name
    return dict(np.load(folder / "reference.npz")), json.loads(
        (folder / "reference.json").read_text()
    )


def imported(name: str):
    """(the model with the converted parameters, the Converted record)."""
    return imported_from(FIXTURES / name)


def imported_from(folder):
    converted = interop.read_hf(folder)
    graphdef, _ = models.abstract_model(converted.cfg)
    return nnx.merge(graphdef, converted.params), converted


def masked_max(diff: np.ndarray, mask: np.ndarray) -> float:
    """The largest |difference| at real (unpadded) positions."""
    return float((np.abs(diff) * mask.reshape(*mask.shape, *[1] * (diff.ndim - mask.ndim))).max())


# ------------------------------------------------------------------------------------ GPT-2
@pytest.fixture(scope="module")
def gpt2():
    return imported("gpt2")


@pytest.mark.parametrize("side", ["right", "left"])
def test_gpt2_logits_and_hidden_states(gpt2, side):
    model, _ = gpt2
    ref, _ = reference("gpt2")
    ids, mask = ref[f"{side}_input_ids"], ref[f"{side}_attention_mask"]
    assert (ids[mask == 1] == 0).any(), "the batch must hold a real token 0"
    logits = model(jnp.asarray(ids), attention_mask=jnp.asarray(mask, bool))
    assert masked_max(np.asarray(logits) - ref[f"{side}_logits"], mask) < TOLERANCE


def test_gpt2_tokenizer_and_special_ids(gpt2):
    _, converted = gpt2
    _, meta = reference("gpt2")
    tokenizer = converted.tokenizer
    for item in meta["texts"]:
        assert tokenizer.encode(item["text"]) == item["input_ids"]
        assert tokenizer.decode(item["input_ids"]) == item["text"]
    eot = meta["special_tokens"]["eos"]
    assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id) == (eot, eot, eot)


def test_gpt2_sharded_checkpoint_equals_single_file(gpt2):
    model, _ = gpt2
    sharded, _ = imported("gpt2_sharded")
    assert len(list((FIXTURES / "gpt2_sharded").glob("model-*.safetensors"))) > 1
    for a, b in zip(
        jax.tree.leaves(nnx.state(model)), jax.tree.leaves(nnx.state(sharded)), strict=True
    ):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------- BERT
@pytest.mark.parametrize(
    "name, outputs",
    [
        ("bert_pretraining", ("prediction_logits", "seq_relationship_logits")),
        ("bert_model", ("pooler_output",)),
        ("bert_sequence", ("logits",)),
        ("bert_mlm", ("mlm",)),
    ],
)
def test_bert_outputs(name, outputs):
    model, converted = imported(name)
    ref, meta = reference(name)
    mask = ref["attention_mask"]
    hidden = model(
        jnp.asarray(ref["input_ids"]),
        jnp.asarray(ref["token_type_ids"]),
        attention_mask=jnp.asarray(mask, bool),
    )
    assert masked_max(np.asarray(hidden) - ref["last_hidden_state"], mask) < TOLERANCE
    pooled = model.pool(hidden)
    got = {
        "prediction_logits": lambda: model.mlm_logits(hidden),
        "mlm": lambda: model.mlm_logits(hidden),
        "seq_relationship_logits": lambda: model.nsp_logits(pooled),
        "pooler_output": lambda: pooled,
        "logits": lambda: model.classify(pooled),
    }
    for key in outputs:
        want = ref["logits" if key == "mlm" else key]
        diff = np.asarray(got[key]()) - want
        assert (masked_max(diff, mask) if diff.ndim == 3 else np.abs(diff).max()) < TOLERANCE, key
    tokenizer = converted.tokenizer
    for item in meta["texts"]:
        ids = [tokenizer.cls_id, *tokenizer.encode(item["text"]), tokenizer.sep_id]
        assert ids == item["input_ids"]


# -------------------------------------------------------------------------------------- ViT
@pytest.mark.parametrize("name", ["vit_classifier", "vit_model"])
def test_vit_outputs_from_pixels_in_0_1(name):
    """The checkpoint's (x - 0.5) / 0.5 normalisation is folded into the patch projection."""
    model, converted = imported(name)
    ref, _ = reference(name)
    pixels = jnp.asarray(ref["images"].astype(np.float32) / 255)
    hidden, _ = model.encode(pixels, return_attention=False)
    assert np.abs(np.asarray(hidden) - ref["last_hidden_state"]).max() < TOLERANCE
    if "logits" in ref:
        assert np.abs(np.asarray(model(pixels)) - ref["logits"]).max() < TOLERANCE
    else:
        assert converted.fresh == ["classifier head"]


# ----------------------------------------------------------------------------------- Marian
@pytest.fixture(scope="module")
def marian():
    return imported("marian")


def test_marian_encoder_states_and_logits(marian):
    """To 1e-5 of the largest value: the fixture's weights (std 0.5, for a decoder that does
    not repeat one token) give logits up to about 7, and float32 rounding grows with them."""
    model, _ = marian
    ref, _ = reference("marian")
    src = jnp.asarray(ref["input_ids"])
    memory = model.encode(src)
    scale = np.abs(ref["encoder_last_hidden_state"]).max()
    diff = np.asarray(memory) - ref["encoder_last_hidden_state"]
    assert masked_max(diff, ref["attention_mask"]) < TOLERANCE * scale
    logits = model(src, jnp.asarray(ref["decoder_input_ids"]))
    mask = ref["decoder_attention_mask"]
    assert (ref["decoder_input_ids"][:, 0] == model.cfg.pad_id).all()  # Starts from <pad>.
    scale = np.abs(ref["logits"]).max()
    assert masked_max(np.asarray(logits) - ref["logits"], mask) < TOLERANCE * scale


def test_marian_tokenizer(marian):
    _, converted = marian
    _, meta = reference("marian")
    tokenizer = converted.tokenizer
    for item in meta["sources"]:
        assert [*tokenizer.encode(item["text"]), tokenizer.eos_id] == item["input_ids"]
    specials = meta["special_tokens"]
    assert tokenizer.bos_id == tokenizer.pad_id == specials["decoder_start"] == specials["pad"]
    assert tokenizer.eos_id == specials["eos"]


@pytest.mark.parametrize(
    "name, kept", [("gpt2", ("vocab.json", "merges.txt")), ("bert_pretraining", ("vocab.txt",))]
)
def test_tokenizers_without_tokenizer_json(name, kept, tmp_path):
    """GPT-2's vocab.json + merges.txt and BERT's vocab.txt give transformers' ids too."""
    folder = tmp_path / name
    folder.mkdir()
    for file in ("config.json", "model.safetensors", "tokenizer_config.json", *kept):
        (folder / file).write_bytes((FIXTURES / name / file).read_bytes())
    tokenizer = interop.read_hf(folder).tokenizer
    _, meta = reference(name)
    for item in meta["texts"]:
        ids = tokenizer.encode(item["text"])
        if name != "gpt2":
            ids = [tokenizer.cls_id, *ids, tokenizer.sep_id]
        assert ids == item["input_ids"]
    assert tokenizer.decode(tokenizer.encode("Hello world!")).lower() == "hello world!"


def test_gpt2_model_without_the_lm_prefix(gpt2, tmp_path):
    """`GPT2Model` saves its tensors without "transformer.": the same model comes out."""
    folder = tmp_path / "gpt2_model"
    folder.mkdir()
    for file in ("tokenizer.json", "tokenizer_config.json"):
        (folder / file).write_bytes((FIXTURES / "gpt2" / file).read_bytes())
    config = json.loads((FIXTURES / "gpt2" / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"architectures": ["GPT2Model"]}))
    tensors = load_file(FIXTURES / "gpt2" / "model.safetensors")
    save_file({k.removeprefix("transformer."): v for k, v in tensors.items()},
              folder / "model.safetensors")  # fmt: skip
    model, _ = gpt2
    bare, converted = imported_from(folder)
    assert converted.architecture == "GPT2Model"
    leaves = zip(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(nnx.state(bare)), strict=True)
    for a, b in leaves:
        np.testing.assert_array_equal(a, b)
