"""Serving on a mesh of the 8 fake devices: every front end restores its parameters straight
into their FSDP / tensor-parallel shards and answers exactly as on one device; a mesh that does
not fit the devices or the model is refused with a message naming what to change."""

import io
import json
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from transformer_jax import models
from transformer_jax import sharding as shd
from transformer_jax.cli import classify as classify_cli
from transformer_jax.cli import classify_image as classify_image_cli
from transformer_jax.cli import evaluate as evaluate_cli
from transformer_jax.cli import fill_mask as fill_mask_cli
from transformer_jax.cli import generate as generate_cli
from transformer_jax.cli import translate as translate_cli
from transformer_jax.data.tokenizer import train_tokenizer
from transformer_jax.inference import Classifier, Generator, ImageClassifier, MaskFiller, Translator
from transformer_jax.inference.generator import TextPieces
from transformer_jax.models.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer_jax.models.encoder_decoder import EncoderDecoder, EncoderDecoderConfig
from transformer_jax.models.encoder_only import EncoderOnly, EncoderOnlyConfig
from transformer_jax.models.vit import VisionTransformer, VitConfig
from transformer_jax.runs.checkpoints import Checkpoints
from transformer_jax.runs.layout import Workdir
from transformer_jax.serving.gpt_slots import SlotEngine
from transformer_jax.serving_mesh import MeshError, check_fits, serving_mesh
from transformer_jax.tokens import BERT_SYMBOLS
from transformer_jax.training.state import TrainState

WORDS = "one two three four five six seven eight nine hundred and the json module def return"
TOKENIZER = train_tokenizer(
    (" ".join(np.random.default_rng(i).choice(WORDS.split(), 6)) for i in range(300)),
    vocab_size=48,
    user_defined_symbols=BERT_SYMBOLS,
)
VOCAB = TOKENIZER.vocab_size
ONE_LAYER_EACH = dict(num_encoder_layers=1, num_decoder_layers=1)  # Quicker to compile.
MESHES = ["fsdp=4,tensor=2", "data=2,fsdp=2,tensor=2"]  # fsdp and tensor, then all three axes
# The other front ends share the Translator's loading and placement code: one mesh, the one
# that splits over all three axes, keeps the suite's time in bounds.
ALL_AXES = ["data=2,fsdp=2,tensor=2"]
SOURCES = ["three hundred", "x", "forty-two and seven", "", "nine"]
PROMPTS = ["The json", "", "def f(x):"]


def write_workdir(path, task: str, name: str, model: nnx.Module, labels=None):
    """A workdir as train.py leaves one: config.json, model.json, step 10 of a random model
    of `model`'s shapes."""
    workdir = Workdir.at(path)
    config = {"task": task, "model": {"name": name}, "data": {"tokenizer": "sentencepiece"}}
    workdir.write_config(ml_collections.ConfigDict(config))
    TOKENIZER.save(workdir.tokenizer_model)
    workdir.write_model(name, model.cfg)
    if labels is not None:
        workdir.labels_json.write_text(json.dumps(labels))
    _, params = nnx.split(model)
    params = _varied(params)
    state = TrainState(step=jnp.int32(10), params=params, opt_state={"count": jnp.int32(10)})
    checkpoints = Checkpoints(workdir, keep=1, best_metric="loss", best_mode="min")
    checkpoints.save(10, state, {}, {"seed": 0}, force=True)
    checkpoints.wait()
    checkpoints.close()
    return path


def _varied(params):
    """Weights drawn as an untrained model's are, in numpy (LayerNorm scales 1, biases 0, the
    rest normal(0, 0.2)): a model whose answers differ from one input to the next (one freshly
    initialised by the modules answers all inputs alike)."""
    rng = np.random.default_rng(0)

    def one(path, x):
        name = str(path[-2].key)
        if name == "scale":
            return jnp.ones(x.shape, x.dtype)
        if name in ("bias", "b1", "b2") or name.endswith("_bias"):
            return jnp.zeros(x.shape, x.dtype)
        return jnp.asarray(rng.normal(0.0, 0.2, x.shape), x.dtype)

    return jax.tree_util.tree_map_with_path(one, params)


def one_device():
    return shd.make_mesh({"data": 1}, devices=jax.devices()[:1])


def check_sharded(model: nnx.Module, mesh_text: str) -> None:
    """The parameters live on the mesh `mesh_text` describes, every fsdp/tensor axis splits
    some of them, and no device holds the whole model."""
    leaves = jax.tree.leaves(nnx.state(model, nnx.Param))
    mesh = leaves[0].sharding.mesh
    assert dict(mesh.shape) == dict(serving_mesh(mesh_text).shape)
    for axis in ("fsdp", "tensor"):
        if mesh.shape[axis] > 1:
            split = [x for x in leaves if axis in jax.tree.leaves(tuple(x.sharding.spec))]
            assert split, f"no parameter is split over {axis}"
            for x in split:
                assert x.addressable_shards[0].data.size * mesh.shape[axis] <= x.size
    device = jax.devices()[0]
    on_device = sum(
        s.data.nbytes for x in leaves for s in x.addressable_shards if s.device == device
    )
    total = sum(x.nbytes for x in leaves)
    assert on_device < total / 2, (on_device, total)


# ---------------------------------------------------------------------------- translator
@pytest.fixture(scope="module")
def seq2seq_dir(tmp_path_factory):
    model = EncoderDecoder(
        EncoderDecoderConfig.tiny(vocab_size=VOCAB, max_len=32, **ONE_LAYER_EACH), rngs=nnx.Rngs(3)
    )
    return write_workdir(
        tmp_path_factory.mktemp("seq2seq"), "translation", "encoder_decoder", model
    )


@pytest.fixture(scope="module")
def translations(seq2seq_dir):
    """Greedy and beam-3 outputs of the model on one device."""
    single = Translator.from_checkpoint(seq2seq_dir, mesh=one_device())
    greedy = single.translate(SOURCES, beam_size=1, max_len=8)
    beam = single.translate(SOURCES, beam_size=3, max_len=8)
    assert len(set(greedy)) > 2  # The inputs give different outputs: order mix-ups show.
    return greedy, beam


@pytest.mark.parametrize("mesh", MESHES)
def test_translator_on_a_mesh_equals_one_device(seq2seq_dir, translations, mesh):
    translator = Translator.from_checkpoint(seq2seq_dir, mesh=mesh)
    check_sharded(translator.model, mesh)
    assert translator.translate(SOURCES, beam_size=1, max_len=8) == translations[0]
    assert translator.translate(SOURCES, beam_size=3, max_len=8) == translations[1]


def test_translate_cli_serves_on_a_mesh(seq2seq_dir, translations, capsys, monkeypatch):
    lines = "".join(s + "\n" for s in SOURCES).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines)))
    args = [f"--workdir={seq2seq_dir}", "--beam_size=1", "--max_len=8", "--mesh=fsdp=4,tensor=2"]
    assert translate_cli.main(args) == 0
    assert capsys.readouterr().out.splitlines() == translations[0]


# ---------------------------------------------------------------------------- generator
@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    model = DecoderOnly(
        DecoderOnlyConfig.tiny(vocab_size=VOCAB, max_len=48, num_layers=1), rngs=nnx.Rngs(4)
    )
    return write_workdir(tmp_path_factory.mktemp("lm"), "language_model", "decoder_only", model)


@pytest.mark.parametrize("mesh", ALL_AXES)
def test_generator_on_a_mesh_equals_one_device(lm_dir, mesh):
    expected = Generator.from_checkpoint(lm_dir, mesh=one_device()).generate(
        PROMPTS, 8, temperature=0
    )
    generator = Generator.from_checkpoint(lm_dir, mesh=mesh)
    check_sharded(generator.model, mesh)
    assert generator.generate(PROMPTS, 8, temperature=0) == expected
    assert len(set(expected)) > 1


@pytest.mark.parametrize("mesh", ALL_AXES)
def test_the_servers_slot_engine_on_a_mesh_equals_one_device(lm_dir, mesh):
    """`serve --mesh`: the continuous-batching engine runs its programs on parameters split
    over the mesh, all prompts sharing the slots, and answers as `generate` on one device."""
    expected = Generator.from_checkpoint(lm_dir, mesh=one_device()).generate(
        PROMPTS, 8, temperature=0
    )
    generator = Generator.from_checkpoint(lm_dir, mesh=mesh)
    check_sharded(generator.model, mesh)
    engine = SlotEngine(generator, slots=2, max_new_tokens=8)  # 3 prompts: one waits
    engine.start()
    texts, requests = [""] * len(PROMPTS), []
    try:
        for i, prompt in enumerate(PROMPTS):
            ids = engine.encode(prompt)
            pieces = TextPieces(generator, ids)

            def on_token(token, reason, i=i, pieces=pieces):
                texts[i] += pieces.finish() if token is None else pieces.add(token)

            requests.append(engine.submit(ids, max_new_tokens=8, temperature=0, on_token=on_token))
        assert all(r.wait(120) for r in requests)
    finally:
        engine.stop()
    assert texts == expected


# ---------------------------------------------------------------------------- encoders
@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    cfg = EncoderOnlyConfig.tiny(vocab_size=VOCAB, num_labels=3, num_layers=1)
    model = EncoderOnly(cfg, rngs=nnx.Rngs(5))
    labels = {"label_names": ["a", "b", "c"], "pair": False}
    return write_workdir(tmp_path_factory.mktemp("bert"), "classify", "encoder_only", model, labels)


@pytest.fixture(scope="module")
def vit_dir(tmp_path_factory):
    model = VisionTransformer(VitConfig.tiny(num_layers=1), rngs=nnx.Rngs(6))
    labels = {"label_names": [str(i) for i in range(10)]}
    return write_workdir(tmp_path_factory.mktemp("vit"), "image_classify", "vit", model, labels)


def probabilities(predictions) -> np.ndarray:
    return np.array([list(p.probabilities.values()) for p in predictions])


@pytest.mark.parametrize("mesh", ALL_AXES)
def test_encoders_on_a_mesh_equal_one_device(bert_dir, vit_dir, mesh):
    texts = ["The json module", "x", "def f(x): return x"]
    masked = ["The [MASK] module", "a [MASK] b [MASK]"]
    images = np.random.default_rng(0).uniform(size=(5, 8, 8))
    answers = {}
    for where in (one_device(), mesh):
        classifier = Classifier.from_checkpoint(bert_dir, mesh=where)
        filler = MaskFiller.from_checkpoint(bert_dir, mesh=where)
        vit = ImageClassifier.from_checkpoint(vit_dir, mesh=where)
        guesses = filler.fill_mask(masked, top_k=3, batch_size=8)
        answers[where is mesh] = (
            probabilities(classifier.predict(texts, batch_size=8)),
            [[[c.token for c in mask] for mask in text] for text in guesses],
            np.array([[[c.probability for c in mask] for mask in text] for text in guesses[:1]]),
            probabilities(vit.predict(images, batch_size=8)),
        )
    for model in (classifier.run.model, vit.model):
        check_sharded(model, mesh)
    single, sharded = answers[False], answers[True]
    np.testing.assert_allclose(sharded[0], single[0], rtol=1e-5, atol=1e-6)
    assert sharded[1] == single[1]
    np.testing.assert_allclose(sharded[2], single[2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sharded[3], single[3], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------- bad meshes
@pytest.mark.parametrize(
    ("mesh", "message"),
    [
        ("tensor=8", "tensor=8 does not divide heads of size 4"),
        ("fsdp=3", "8 devices are not divisible by 3"),
        ("data=2,fsdp=2", "needs 4 devices but 8 are available"),
        ("fsdp:4", "'fsdp:4' is not axis=size"),
        ("fsdp=4,fsdp=2", "'fsdp' is given twice"),
        ("model=2", "mesh axes ['model'] are not among"),
        ("fsdp=0", "use a positive integer"),
    ],
)
def test_a_mesh_that_does_not_fit_is_refused_naming_the_flag(seq2seq_dir, capsys, mesh, message):
    with pytest.raises(MeshError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Translator.from_checkpoint(seq2seq_dir, mesh=mesh)
    assert translate_cli.main([f"--workdir={seq2seq_dir}", f"--mesh={mesh}"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: --mesh={mesh}: ") and message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("cli", "workdir", "args"),
    [
        (evaluate_cli, "seq2seq_dir", []),
        (generate_cli, "lm_dir", ["--prompt=x"]),
        (classify_cli, "bert_dir", ["--text=x"]),
        (fill_mask_cli, "bert_dir", ["--text=[MASK]"]),
        (classify_image_cli, "vit_dir", ["--test_images=1"]),
    ],
)
def test_every_cli_names_its_mesh_flag(cli, workdir, args, request, capsys):
    path = request.getfixturevalue(workdir)
    assert cli.main([f"--workdir={path}", "--mesh=fsdp=3", *args]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: --mesh=fsdp=3: ") and "not divisible by 3" in err


def test_mesh_shapes_default_data_to_the_remaining_devices():
    assert dict(serving_mesh("fsdp=4").shape) == {"data": 2, "fsdp": 4, "tensor": 1}
    assert dict(serving_mesh({"tensor": -1}).shape) == {"data": 1, "fsdp": 1, "tensor": 8}
    assert dict(serving_mesh(" data = 2 , tensor=4").shape) == {"data": 2, "fsdp": 1, "tensor": 4}
    assert serving_mesh(None) is None


def test_only_the_vocabulary_may_stay_whole():
    """Heads, widths and d_model must divide; the tokenizer's vocabulary need not."""
    _, params = models.abstract_model(DecoderOnlyConfig.tiny(vocab_size=260, num_heads=8))
    mesh = serving_mesh("tensor=8")
    check_fits(params, mesh)  # 260 % 8 != 0: the embedding stays whole, nothing else.
    assert {name for _, name, *_ in shd.undivided(params, mesh)} == {"vocab"}
    _, params = models.abstract_model(DecoderOnlyConfig.tiny(vocab_size=256, d_ff=36))
    with pytest.raises(MeshError, match="tensor=8 does not divide mlp of size 36"):
        check_fits(params, mesh)
