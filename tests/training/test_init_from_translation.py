"""Fine-tuning a translation model (`config.init_from`): the converted OPUS-MT fixture
(tests/fixtures/hf/marian) continued on a small parallel text through train.py with the commands
docs/interop.md gives, its tokenizer and special ids (`</s>` 0, `<pad>` 194 as padding and as
the decoder's start) laying out the batches; and what does not fit, refused by name."""

import json
import pathlib
import shlex
import shutil

import jax.numpy as jnp
import numpy as np
import pytest

from tests.test_config_overrides import parse
from tests.test_docs import command_lines, package_command
from tests.train_runs import train_once
from tests.training.test_init_from import model_overrides
from transformer_jax import interop, models, tasks
from transformer_jax.cli import convert, evaluate, translate
from transformer_jax.data import translation as data_lib
from transformer_jax.data.pretrained_tokenizer import MarianTokenizer
from transformer_jax.inference.translator import Translator
from transformer_jax.interop import marian as hf_marian
from transformer_jax.runs import reading
from transformer_jax.runs.layout import CheckpointError, Workdir
from transformer_jax.runs.tokenizer import load_tokenizer
from transformer_jax.tasks import TranslationTask
from transformer_jax.tasks.translation import translation_loss
from transformer_jax.training import validate_train_config
from transformer_jax.training.init_from import check_same_model

ROOT = pathlib.Path(__file__).resolve().parents[2]
HF = ROOT / "tests" / "fixtures" / "hf"
pytestmark = pytest.mark.filterwarnings("ignore:the load_module:DeprecationWarning")
EOS, PAD = 0, 194  # The Marian fixture's </s>, and its <pad>: padding and decoder start.
PAIRS = [  # train.tsv: own English-German text (the fixture's tokenizer knows its pieces).
    ("The cat sleeps.", "Die Katze schläft."),
    ("The dog runs in the park.", "Der Hund läuft im Park."),
    ("I like green apples.", "Ich mag grüne Äpfel."),
    ("We read a book.", "Wir lesen ein Buch."),
    ("She drinks cold water.", "Sie trinkt kaltes Wasser."),
    ("He eats bread and cheese.", "Er isst Brot und Käse."),
    ("The house is small.", "Das Haus ist klein."),
    ("My friend lives in Berlin.", "Mein Freund wohnt in Berlin."),
    ("The sun is warm today.", "Die Sonne ist heute warm."),
    ("They play in the garden.", "Sie spielen im Garten."),
    ("The book is on the table.", "Das Buch liegt auf dem Tisch."),
    ("The train is late.", "Der Zug ist spät."),
]
TEST_FLAGS = [  # Beside the documented command: short, and checkable step by step.
    "--config.model.dropout_rate=0.0",  # The first loss is then the converted model's own.
    "--config.data.num_buckets=1",  # Every pair in one batch of 16 rows of 64.
    "--config.data.tokens_per_batch=1024",
    "--config.num_train_steps=4",
    "--config.log_every=1",
    "--config.eval_every=4",
    "--config.checkpoint_every=4",
]


def reference() -> tuple[dict, dict]:
    folder = HF / "marian"
    return dict(np.load(folder / "reference.npz")), json.loads(
        (folder / "reference.json").read_text()
    )


def documented() -> dict[str, list[str]]:
    """docs/interop.md's recipe on the fixture: the arguments of its convert, train.py and
    translate commands."""
    lines = command_lines((ROOT / "docs" / "interop.md").read_text(encoding="utf-8"))
    commands = [c for c in map(package_command, lines) if c is not None]
    found = {
        "convert": [a for n, a in commands if "--from_hf=tests/fixtures/hf/marian" in a],
        "train": [a for n, a in commands if "--config.init_from=runs/tiny-en-de" in a],
        "translate": [
            a for n, a in commands if n == "translate" and any("tiny-en-de" in x for x in a)
        ],
    }
    assert all(len(c) == 1 for c in found.values()), found
    return {name: c[0] for name, c in found.items()}


def _placed(arg: str, root: pathlib.Path) -> str:
    """A documented argument with its files in `root` (runs/, train.tsv, valid.tsv)."""
    if "=" not in arg:
        return arg
    flag, value = arg.split("=", 1)
    if value.startswith("runs/") or value in ("train.tsv", "valid.tsv"):
        value = str(root / value)
    return f"{flag}={value}"


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> dict:
    """The documented recipe run in a temporary folder: the fixture converted, then 4 steps of
    train.py from it on train.tsv (PAIRS) and valid.tsv (the fixture's 4 reference pairs)."""
    root = tmp_path_factory.mktemp("recipe")
    _, meta = reference()
    (root / "train.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    valid = zip(meta["sources"], meta["targets"], strict=True)
    (root / "valid.tsv").write_text(
        "".join(f"{s['text']}\t{t['text']}\n" for s, t in valid), encoding="utf-8"
    )
    commands = documented()
    args = [_placed(a, root) for a in commands["convert"]]
    assert (
        convert.main([a.replace("tests/fixtures/hf/marian", str(HF / "marian")) for a in args]) == 0
    )
    train = [_placed(a, root) for a in commands["train"]]
    (config,) = [a.split("=", 1)[1] for a in train if a.startswith("--config=")]
    (workdir,) = [a.split("=", 1)[1] for a in train if a.startswith("--workdir=")]
    flags = [a for a in train if a.startswith("--config.")]
    run = train_once(pathlib.Path(workdir), config, *flags, *TEST_FLAGS)
    return {
        "root": root,
        "run": run,
        "converted": root / "runs" / "tiny-en-de",
        "commands": commands,
    }


def _rows(workdir: pathlib.Path, split: str) -> list[dict]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def test_the_run_continues_the_converted_model_with_its_tokenizer_and_ids(recipe):
    run, converted = recipe["run"], recipe["converted"]
    overrides = model_overrides("configs/text.py", converted, {"vocab_size": 195, "max_len": 64})
    documented_model = [a for a in recipe["commands"]["train"] if a.startswith("--config.model.")]
    assert documented_model == shlex.split(" ".join(overrides))  # What the error says to add.
    stderr = (run / "train.stderr").read_text()
    assert f"initialised from {converted} step 0: 56 parameter arrays copied, 0 new" in stderr

    workdir = Workdir.at(run)
    config = workdir.read_config()
    tokenizer = load_tokenizer(workdir, config)  # the run's copy of the Marian tokenizer
    assert isinstance(tokenizer, MarianTokenizer)
    assert (tokenizer.eos_id, tokenizer.pad_id, tokenizer.bos_id) == (EOS, PAD, PAD)
    for name in ("source.spm", "target.spm", "vocab.json"):
        assert (run / "tokenizer" / name).read_bytes() == (
            converted / "tokenizer" / name
        ).read_bytes()

    # valid.tsv is the fixture's reference batch: laid out as transformers lays it out, and the
    # converted model gives transformers' logits on it.
    ref, meta = reference()
    (batch, *_) = data_lib.make_eval_batches(config.data, tokenizer, "eval")
    real = batch["weights"][:4] == 1
    for row, (source, target) in enumerate(zip(meta["sources"], meta["targets"], strict=True)):
        length, labels = len(source["input_ids"]), target["labels"]
        assert batch["src"][row, :length].tolist() == source["input_ids"]  # ids + </s> (0)
        assert set(batch["src"][row, length:].tolist()) == {PAD}
        assert batch["tgt_out"][row, : len(labels)].tolist() == labels  # ends with </s> (0)
        assert batch["tgt_in"][row, : len(labels)].tolist() == [PAD, *labels[:-1]]
        assert real[row].sum() == len(labels) and labels[-1] == EOS
    pretrained = Workdir.at(converted)
    model, _ = reading.load_model(pretrained, pretrained.read_config(), None)
    width = ref["decoder_input_ids"].shape[1]
    logits = np.asarray(model(jnp.asarray(batch["src"][:4]), jnp.asarray(batch["tgt_in"][:4])))
    ours = logits[:, :width][real[:, :width]]
    theirs = ref["logits"][ref["decoder_attention_mask"] == 1]
    scale = np.abs(theirs).max()
    np.testing.assert_allclose(ours / scale, theirs / scale, atol=1e-5)

    # The first step's loss is the converted model's own on the first batch; then it falls.
    train = _rows(run, "train")
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    first = next(data_lib.make_train_iterator(config.data, tokenizer, workdir))
    assert first["weights"].sum() == sum(len(tokenizer.encode_target(t)) + 1 for _, t in PAIRS)
    _, sums = translation_loss(
        model, {k: jnp.asarray(v) for k, v in first.items()}, None, True,
        label_smoothing=config.label_smoothing,
    )  # fmt: skip
    assert float(sums["tokens"]) == train[0]["tokens"]
    own = float(sums["loss_sum"]) / float(sums["tokens"])
    assert own == pytest.approx(train[0]["loss"], rel=1e-5)
    assert train[-1]["loss"] < train[0]["loss"]


def test_the_fine_tuned_workdir_translates_and_stands_alone(recipe, tmp_path, capsys):
    run, root = recipe["run"], recipe["root"]
    sources = ["The cat sleeps.", "It is raining."]
    (tmp_path / "in.txt").write_text("\n".join(sources) + "\n")
    command = [_placed(a, root) for a in recipe["commands"]["translate"]]
    assert command == [f"--workdir={run}"]
    output = tmp_path / "out.txt"
    assert translate.main([*command, f"--input={tmp_path / 'in.txt'}", f"--output={output}"]) == 0
    translated = output.read_text().splitlines()
    assert translated == Translator.from_checkpoint(run).translate(sources)
    assert all(isinstance(t, str) for t in translated) and len(translated) == 2

    alone = tmp_path / "run"  # The converted workdir gone: the run's copies are read.
    shutil.copytree(run, alone, ignore=shutil.ignore_patterns("run.lock"))
    config = json.loads((alone / "config.json").read_text())
    config["init_from"] = str(tmp_path / "gone")
    (alone / "config.json").write_text(json.dumps(config))
    assert evaluate.main([f"--workdir={alone}", "--split=eval", "--beam_size=1"]) == 0
    assert "4 eval sentences" in capsys.readouterr().out


# ----------------------------------------------------------------------- what is refused
@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("converted")
    for name in ("marian", "gpt2"):
        interop.from_hf(HF / name, root / name)
    return {"marian": root / "marian", "gpt2": root / "gpt2"}


def _task(workdir: pathlib.Path, *flags: str) -> TranslationTask:
    return TranslationTask(parse(ROOT / "configs/text.py", *flags), Workdir.at(workdir))


def test_what_does_not_fit_the_pretrained_model_is_refused_by_name(converted, tmp_path):
    marian = str(converted["marian"])
    with pytest.raises(CheckpointError, match=r"config.init_from='.*/nowhere' \(the translation"):
        _task(tmp_path / "a", f"--config.init_from={tmp_path / 'nowhere'}",
              "--config.data.tokenizer=pretrained")  # fmt: skip
    with pytest.raises(ValueError) as error:  # the configured tokenizer is another
        _task(tmp_path / "b", f"--config.init_from={marian}")
    assert "config.data.tokenizer='sentencepiece'" in str(error.value)
    assert f"'pretrained' tokens ({marian}/tokenizer/)" in str(error.value)
    assert "Set --config.data.tokenizer=pretrained" in str(error.value)
    spm = str(HF / "marian" / "source.spm")
    with pytest.raises(ValueError, match="spm_model_path=.*source.spm.*brings its own tokenizer"):
        _task(tmp_path / "c", f"--config.init_from={marian}", "--config.data.tokenizer=pretrained",
              f"--config.data.spm_model_path={spm}")  # fmt: skip
    with pytest.raises(ValueError, match="holds a 'language_model' run of a 'decoder_only' model"):
        _task(tmp_path / "d", f"--config.init_from={converted['gpt2']}",
              "--config.data.tokenizer=pretrained")  # fmt: skip
    assert not (tmp_path / "d").exists()  # refused before a tokenizer was kept

    keeps_another = tmp_path / "e"  # e.g. a workdir first started from GPT-2's tokenizer
    shutil.copytree(converted["gpt2"] / "tokenizer", keeps_another / "tokenizer")
    with pytest.raises(ValueError, match=r"keeps another tokenizer \(.*/e/tokenizer/.*\) than"):
        _task(keeps_another, f"--config.init_from={marian}", "--config.data.tokenizer=pretrained")

    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("The cat sleeps.\tDie Katze schläft.\n", encoding="utf-8")
    files = (f"--config.data.text_train_tsv={tsv}", f"--config.data.text_eval_tsv={tsv}")
    alone = parse(ROOT / "configs/text.py", "--config.data.tokenizer=pretrained", *files)
    with pytest.raises(ValueError, match=r"set --config.init_from=<its workdir>"):
        validate_train_config(alone)
    fine = _task(
        tmp_path / "f", f"--config.init_from={marian}", "--config.data.tokenizer=pretrained"
    )
    assert fine.tokenizer.eos_id == EOS and fine.data_values()["vocab_size"] == 195


# config.json of Helsinki-NLP/opus-mt-en-de, which docs/interop.md fine-tunes.
HUB_OPUS_MT_EN_DE = dict(
    vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6,
    encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
    decoder_ffn_dim=2048, activation_function="swish", scale_embedding=True,
    pad_token_id=58100, eos_token_id=0, decoder_start_token_id=58100,
    max_position_embeddings=512, dropout=0.1, attention_dropout=0.0,
)  # fmt: skip


def test_the_documented_opus_mt_command_gives_its_model_section():
    text = (ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    (command,) = [c for c in command_lines(text) if "--config.init_from=runs/en-de" in c]
    assert command[1:3] == ["train.py", "--config=configs/text.py"]
    config = parse(ROOT / "configs/text.py", *[a for a in command if a.startswith("--config.")])
    cfg = models.build_config(config.model, {"vocab_size": 58101, "max_len": config.data.max_len})
    pretrained = hf_marian.model_config(HUB_OPUS_MT_EN_DE, "opus-mt-en-de")
    check_same_model(cfg, pretrained, "model.json", task="translation")  # no error
    assert tasks.get(config.task) is TranslationTask and config.data.tokenizer == "pretrained"
