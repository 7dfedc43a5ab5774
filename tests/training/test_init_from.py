"""Fine-tuning from a converted Hugging Face checkpoint (`config.init_from`; the checkpoints are
tests/fixtures/hf's): GPT-2 continued on own text with its own tokenizer and special ids, a ViT
with a new head on other images, a BERT fine-tuned to classify, and errors that name what to
set."""

import dataclasses
import json
import math
import pathlib
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from PIL import Image

from tests.test_config_overrides import parse
from tests.test_docs import command_lines
from tests.train_runs import train_once
from transformer_jax import interop, models, tasks
from transformer_jax.cli import evaluate
from transformer_jax.data.bert.inputs import specials_of
from transformer_jax.data.lm import pipeline as lm_pipeline
from transformer_jax.data.pretrained_tokenizer import PretrainedTokenizer
from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.generator import Generator
from transformer_jax.inference.image_classifier import ImageClassifier
from transformer_jax.interop import gpt2 as hf_gpt2
from transformer_jax.interop import vit as hf_vit
from transformer_jax.runs import reading
from transformer_jax.runs.layout import Workdir
from transformer_jax.runs.tokenizer import load_tokenizer
from transformer_jax.sharding import make_mesh
from transformer_jax.tasks import ImageClassificationTask, LanguageModelTask
from transformer_jax.tasks.language_model import lm_loss
from transformer_jax.tasks.pretrained import pretrained_tokenizer, read_pretrained
from transformer_jax.training import validate_train_config
from transformer_jax.training.init_from import check_same_model, init_from_workdir
from transformer_jax.training.optimizer import make_optimizer
from transformer_jax.training.state import create_train_state

ROOT = pathlib.Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "fixtures" / "hf"
pytestmark = pytest.mark.filterwarnings("ignore:the load_module:DeprecationWarning")
ENDOFTEXT = 329  # GPT-2's <|endoftext|> in the fixture: bos, eos and pad.
TRAIN = [  # "!" is GPT-2's token 0, the project's padding id: it must be predicted all the same.
    "Hello world! This is a test!! Of the model.",
    "Another document, with more words! And more.",
    "Short one!",
    "The quick brown fox jumps!",
    "No bang in this one, none at all.",
]
CLASSES = ("ant", "bee", "cow")


def model_overrides(config_file: str, pretrained: pathlib.Path, data_values: dict) -> list[str]:
    """The `--config.model.<field>=<value>` flags that init_from's error tells a user to add to
    `config_file` for `pretrained`'s model (the data deciding `data_values`)."""
    config = parse(ROOT / config_file)
    task = tasks.get(config.task)
    cfg = models.build_config(config.model, data_values)
    pretrained_cfg = read_pretrained(str(pretrained), task.name).model_cfg
    with pytest.raises(ValueError, match="set the model section as the pretrained") as error:
        check_same_model(cfg, pretrained_cfg, "model.json", free=task.fresh_fields)
    return re.findall(r"--config\.model\.\S+", str(error.value))


def write_documents(path: pathlib.Path, documents: list[str]) -> str:
    path.write_text("\n\n".join(documents), encoding="utf-8")
    return str(path)


# ------------------------------------------------------------------------------------ GPT-2
def gpt_flags(gpt2: pathlib.Path, root: pathlib.Path) -> list[str]:
    """What continues the converted GPT-2 on own text, beside the model section."""
    return [
        f"--config.init_from={gpt2}",
        "--config.data.tokenizer=pretrained",
        "--config.data.source=text",
        f"--config.data.text_train={write_documents(root / 'train.txt', TRAIN)}",
        f"--config.data.text_eval={write_documents(root / 'eval.txt', TRAIN[:2])}",
        f"--config.data.text_test={write_documents(root / 'test.txt', TRAIN[2:])}",
        "--config.data.max_len=32",  # The fixture's model has 40 positions.
        "--config.data.tokens_per_batch=512",  # 16 rows of 32: every document in one batch.
        "--config.data.eval_batch_size=8",
        "--config.model.dropout_rate=0.0",  # So that the first loss is the model's own.
        "--config.model.attention_dropout_rate=0.0",
        "--config.num_train_steps=3",
        "--config.eval_every=3",
        "--config.checkpoint_every=3",
        "--config.samples=0",
        "--config.baselines=True",
    ]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> pathlib.Path:
    workdir = tmp_path_factory.mktemp("converted") / "gpt2"
    interop.from_hf(HF / "gpt2", workdir)
    return workdir


@pytest.fixture(scope="module")
def gpt_run(gpt2, tmp_path_factory) -> pathlib.Path:
    """configs/gpt_tiny.py with the model section the error names, 3 steps from GPT-2."""
    root = tmp_path_factory.mktemp("gpt_run")
    overrides = model_overrides("configs/gpt_tiny.py", gpt2, {"vocab_size": 330})
    return train_once(root / "run", "configs/gpt_tiny.py", *overrides, *gpt_flags(gpt2, root))


def _rows(workdir: pathlib.Path, split: str) -> list[dict]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def test_the_model_section_error_names_each_field_and_its_override(gpt2):
    overrides = model_overrides("configs/gpt_tiny.py", gpt2, {"vocab_size": 330})
    assert "--config.model.d_model=24" in overrides and "--config.model.pad_id=329" in overrides
    assert "--config.model.max_len=40" in overrides
    assert not any("dropout" in flag or "vocab_size" in flag for flag in overrides)  # free; data
    config = parse(ROOT / "configs/gpt_tiny.py", "--config.model.vocab_size=64")
    cfg = models.build_config(config.model)
    pretrained = read_pretrained(str(gpt2), "language_model").model_cfg
    with pytest.raises(ValueError) as error:
        check_same_model(cfg, pretrained, "model.json", task="language_model",
                         hints=LanguageModelTask.init_from_hints)  # fmt: skip
    message = str(error.value)
    assert "the language_model task's model differs" in message
    assert "d_model: this config 32, pretrained 24" in message
    assert "leave config.model.vocab_size unset: the pretrained model's (330)" in message
    same = dataclasses.replace(pretrained, dropout_rate=0.3, scan_layers=True, remat="full")
    check_same_model(same, pretrained, "model.json")  # how it trains and runs may differ


# config.json fields of the hub checkpoints that docs/interop.md fine-tunes.
HUB_GPT2 = dict(
    vocab_size=50257,
    n_layer=12,
    n_embd=768,
    n_head=12,
    n_positions=1024,
    eos_token_id=50256,
    activation_function="gelu_new",
    layer_norm_epsilon=1e-5,
)
HUB_VIT_B16 = dict(image_size=224, patch_size=16, num_channels=3, num_hidden_layers=12,
                   hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                   hidden_act="gelu", layer_norm_eps=1e-12, num_labels=1000)  # fmt: skip


def test_the_documented_commands_give_the_converted_models_sections():
    text = (ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    commands = [c for c in command_lines(text) if c[1:2] == ["train.py"]]
    for init_from, pretrained_cfg in (
        ("runs/gpt2", hf_gpt2.model_config(HUB_GPT2, "gpt2")),
        ("runs/vit", hf_vit.model_config(HUB_VIT_B16, "vit")),
    ):
        (command,) = [c for c in commands if f"--config.init_from={init_from}" in c]
        (config_file,) = [a.split("=", 1)[1] for a in command if a.startswith("--config=")]
        config = parse(ROOT / config_file, *[a for a in command if a.startswith("--config.")])
        task = tasks.get(config.task)
        data = config.data
        values = {"vocab_size": pretrained_cfg.vocab_size} if task.name == "language_model" else {
            "num_classes": 17, "channels": data.folder_channels,
            "image_height": data.folder_size, "image_width": data.folder_size,
        }  # fmt: skip
        cfg = models.build_config(config.model, values)
        check_same_model(cfg, pretrained_cfg, "model.json", free=task.fresh_fields)  # no error
        assert config.get("init_from") == init_from


def test_the_first_step_is_the_converted_models_own_loss_and_counts_every_bang(gpt2, gpt_run):
    train = _rows(gpt_run, "train")
    assert [r["step"] for r in train] == [1, 2, 3] and all(math.isfinite(r["loss"]) for r in train)
    stderr = (gpt_run / "train.stderr").read_text()
    assert f"initialised from {gpt2} step 0: 34 parameter arrays copied, 0 new" in stderr

    run = Workdir.at(gpt_run)
    config = run.read_config()
    tokenizer = load_tokenizer(run, config)  # the run's copy of GPT-2's tokenizer
    assert isinstance(tokenizer, PretrainedTokenizer)
    assert tokenizer.bos_id == tokenizer.eos_id == tokenizer.pad_id == ENDOFTEXT
    copied, source = gpt_run / "tokenizer", gpt2 / "tokenizer"
    assert (copied / "tokenizer.json").read_text() == (source / "tokenizer.json").read_text()

    batch = next(lm_pipeline.make_lm_train_iterator(config.data, tokenizer, run))
    real = batch["weights"] == 1
    encoded = [tokenizer.encode(text) for text in TRAIN]
    assert real.sum() == sum(len(ids) + 1 for ids in encoded) == train[0]["tokens"]
    bangs = sum(ids.count(0) for ids in encoded)
    assert bangs == 6 and ((batch["targets"] == 0) & real).sum() == bangs
    segments = batch["segment_ids"]
    starts = real & (batch["positions"] == 0)
    ends = real & (segments != np.pad(segments[:, 1:], ((0, 0), (0, 1))))  # a segment's last
    assert starts.sum() == ends.sum() == len(TRAIN)  # every document in one piece
    assert set(batch["inputs"][starts]) == set(batch["targets"][ends]) == {ENDOFTEXT}

    pretrained = Workdir.at(gpt2)
    model, _ = reading.load_model(pretrained, pretrained.read_config(), None)
    _, sums = lm_loss(model, {k: jnp.asarray(v) for k, v in batch.items()}, None, True)
    assert float(sums["tokens"]) == train[0]["tokens"]
    own = float(sums["loss_sum"]) / float(sums["tokens"])
    assert own == pytest.approx(train[0]["loss"], rel=1e-5)
    assert train[-1]["loss"] < train[0]["loss"]


def test_the_run_reports_bits_per_byte_generates_and_stands_alone(gpt_run, tmp_path, capsys):
    (test,) = _rows(gpt_run, "test")
    assert 0 < test["bits_per_byte"] < 16 and test["lzma_bits_per_byte"] > 0
    assert "bits/byte" in (gpt_run / "train.stderr").read_text()

    generator = Generator.from_checkpoint(gpt_run)
    assert generator.steps == (3,) and generator.tokenizer.eos_id == ENDOFTEXT
    (text,) = generator.generate(["Hello world"], max_new_tokens=6, temperature=0)
    assert isinstance(text, str)

    alone = tmp_path / "run"  # The pretrained workdir gone: its copies are read.
    shutil.copytree(gpt_run, alone, ignore=shutil.ignore_patterns("run.lock"))
    config = json.loads((alone / "config.json").read_text())
    config["init_from"] = str(tmp_path / "gone")
    (alone / "config.json").write_text(json.dumps(config))
    assert evaluate.main([f"--workdir={alone}", "--split=test"]) == 0
    assert "bits per byte" in capsys.readouterr().out


def test_tokenizer_fields_that_cannot_fit_the_pretrained_model_are_refused(gpt2, tmp_path):
    byte = parse(ROOT / "configs/gpt_tiny.py", f"--config.init_from={gpt2}")
    with pytest.raises(ValueError, match=r"Set --config.data.tokenizer=pretrained"):
        LanguageModelTask(byte, Workdir.at(tmp_path / "a"))
    pretrained = ("--config.data.tokenizer=pretrained", f"--config.init_from={gpt2}")
    spm = parse(ROOT / "configs/gpt_tiny.py", *pretrained, f"--config.data.spm_model_path={gpt2}")
    with pytest.raises(ValueError, match="Unset spm_model_path"):
        LanguageModelTask(spm, Workdir.at(tmp_path / "b"))
    alone = parse(ROOT / "configs/gpt_tiny.py", "--config.data.tokenizer=pretrained")
    with pytest.raises(ValueError, match=r"set --config.init_from=<its workdir>"):
        validate_train_config(alone)


def test_a_sentencepiece_run_lends_its_tokenizer_model_which_the_new_run_keeps(
    tiny_workdir, tmp_path
):
    source = tmp_path / "pretrained"  # a run trained here, with a SentencePiece tokenizer.model
    shutil.copytree(tiny_workdir, source)
    new = Workdir.at(tmp_path / "new")
    data = parse(ROOT / "configs/gpt_tiny.py", "--config.data.tokenizer=sentencepiece").data
    tokenizer = pretrained_tokenizer(data, new, str(source), "language_model")
    assert (
        tokenizer.eos_id == 1
        and (tmp_path / "new" / "tokenizer.model").read_bytes()
        == (source / "tokenizer.model").read_bytes()
    )
    data.tokenizer = "byte"
    with pytest.raises(ValueError, match="Set --config.data.tokenizer=sentencepiece"):
        pretrained_tokenizer(data, new, str(source), "language_model")
    data.tokenizer = "sentencepiece"
    shutil.rmtree(source)  # gone: the kept copy is read
    again = pretrained_tokenizer(data, new, str(source), "language_model")
    assert again.fingerprint == tokenizer.fingerprint


# -------------------------------------------------------------------------------------- ViT
def image_folders(root: pathlib.Path, size: int) -> tuple[pathlib.Path, pathlib.Path]:
    """train/ and eval/ folders of size x size RGB images, 8 and 2 per class, each class its
    own brightness."""
    rng = np.random.default_rng(0)
    for split, count in (("train", 8), ("eval", 2)):
        for label, name in enumerate(CLASSES):
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(count):
                pixels = rng.integers(0, 80, (size, size, 3)) + 80 * label
                Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{i}.png")
    return root / "train", root / "eval"


def vit_flags(vit: pathlib.Path, train: pathlib.Path, eval_: pathlib.Path) -> list[str]:
    """What fine-tunes the converted ViT on the image folders, beside the model section."""
    return [
        f"--config.init_from={vit}",
        "--config.data.source=folder",
        f"--config.data.folder_train={train}",
        f"--config.data.folder_eval={eval_}",
        "--config.data.folder_channels=3",
        "--config.data.batch_size=8",
        "--config.data.eval_batch_size=8",
        "--config.num_train_steps=3",
        "--config.eval_every=3",
        "--config.checkpoint_every=3",
    ]


@pytest.fixture(scope="module")
def vit(tmp_path_factory) -> pathlib.Path:
    workdir = tmp_path_factory.mktemp("converted") / "vit"
    interop.from_hf(HF / "vit_classifier", workdir)  # 12x12 RGB, 5 classes
    return workdir


@pytest.fixture(scope="module")
def vit_setup(vit, tmp_path_factory) -> tuple[list[str], pathlib.Path]:
    """(configs/vit_tiny.py's flags for the converted ViT on 3 classes of 12x12 images, root)."""
    root = tmp_path_factory.mktemp("vit_run")
    train, eval_ = image_folders(root / "images", 12)
    values = {"num_classes": 3, "image_height": 12, "image_width": 12, "channels": 3}
    return [
        *model_overrides("configs/vit_tiny.py", vit, values),
        *vit_flags(vit, train, eval_),
    ], root


def _task_state(flags: list[str], workdir: pathlib.Path):
    config = parse(ROOT / "configs/vit_tiny.py", *flags)
    task = ImageClassificationTask(config, Workdir.at(workdir))
    cfg = models.build_config(config.model, task.data_values())
    tx, _ = make_optimizer(cfg.d_model)
    _, state, _ = create_train_state(cfg, tx, make_mesh({"data": -1}), seed=3)
    return task, cfg, state


def _flat(tree) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {"/".join(map(reading.key_name, p)): np.asarray(v) for p, v in leaves}


def test_every_vit_parameter_but_the_head_is_the_converted_ones(vit, vit_setup, tmp_path):
    flags, _ = vit_setup
    task, cfg, state = _task_state(flags, tmp_path)
    assert cfg.num_classes == 3  # from the new images, not the pretrained 5
    new_state, note = init_from_workdir(state, str(vit), cfg, task)
    assert note.endswith("2 new (head_kernel, head_bias)")
    pretrained = Workdir.at(vit)
    model, _ = reading.load_model(pretrained, pretrained.read_config(), None)
    before, after = _flat(state.params), _flat(new_state.params)
    source = _flat(nnx.state(model))
    for name, value in after.items():
        if name.split("/")[0] in ("head_kernel", "head_bias"):
            np.testing.assert_array_equal(value, before[name])  # new (ViT's head starts at 0)
        else:
            np.testing.assert_array_equal(value, source[name])
    assert after["head_kernel/value"].shape == (16, 3)


def test_a_vit_fine_tuned_with_a_new_head_classifies_the_new_classes(vit, vit_setup):
    flags, root = vit_setup
    run = train_once(root / "run", "configs/vit_tiny.py", *flags)
    assert "2 new (head_kernel, head_bias)" in (run / "train.stderr").read_text()
    train = _rows(run, "train")
    assert train[0]["loss"] == pytest.approx(math.log(3), rel=1e-5)  # a zero head: uniform
    assert all(math.isfinite(r["loss"]) for r in train) and len(train) == 3
    classifier = ImageClassifier.from_checkpoint(run)
    assert classifier.label_names == CLASSES
    image = np.asarray(Image.open(root / "images" / "eval" / "bee" / "0.png"))
    prediction = classifier.predict(image)
    assert prediction.label in CLASSES and set(prediction.probabilities) == set(CLASSES)


def test_images_of_another_size_name_the_data_fields_to_set(vit, vit_setup, tmp_path):
    flags, _ = vit_setup
    train, eval_ = image_folders(tmp_path / "images16", 16)
    flags = [*flags, f"--config.data.folder_train={train}", f"--config.data.folder_eval={eval_}"]
    task, cfg, state = _task_state(flags, tmp_path / "run")
    with pytest.raises(ValueError) as error:
        init_from_workdir(state, str(vit), cfg, task)
    message = str(error.value)
    assert "the image_classify task's model differs" in message
    assert "image_height: this config 16, pretrained 12" in message
    assert message.count("--config.data.folder_size=12") == 1  # height and width: one fix
    assert "--config.model" not in message  # nothing else differs


# ------------------------------------------------------------------------------------- BERT
def test_a_converted_bert_fine_tunes_to_classify(tmp_path):
    """configs/bert_classify_tiny.py from the converted BertForPreTraining fixture: its
    tokenizer (its own [CLS] 2, [SEP] 3) is copied into the run, which trains and serves."""
    bert = tmp_path / "bert"
    interop.from_hf(HF / "bert_pretraining", bert)
    overrides = model_overrides(
        "configs/bert_classify_tiny.py", bert, {"vocab_size": 250, "num_labels": 2}
    )
    run = train_once(
        tmp_path / "run", "configs/bert_classify_tiny.py", *overrides,
        f"--config.init_from={bert}", "--config.num_train_steps=3", "--config.eval_every=3",
        "--config.checkpoint_every=3", "--config.data.max_len=48",
    )  # fmt: skip
    assert (run / "tokenizer" / "special_tokens.json").is_file()
    assert not (run / "tokenizer.model").exists()
    assert _rows(run, "test") and math.isfinite(_rows(run, "test")[-1]["loss"])
    classifier = Classifier.from_checkpoint(run)
    assert (specials_of(classifier.run.tokenizer).cls, classifier.run.tokenizer.sep_id) == (2, 3)
    assert classifier.predict([("four", "quatre")])[0].label in classifier.label_names
