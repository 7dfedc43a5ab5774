"""`Task.batch_spec` and `Task.abstract_data_values`, from the config alone, against the real
task built on each offline config: its training batches (a whole epoch where buckets give
several shapes), its evaluation batches and its `data_values()`. The WMT'14 configs, whose data
is not here, are checked against the shapes their fields imply."""

from __future__ import annotations

import importlib
import itertools

import jax
import numpy as np
import pytest
import tensorflow_datasets as tfds
from PIL import Image

from transformer_jax import tasks
from transformer_jax.data import translation as translation_data
from transformer_jax.runs.layout import Workdir

CASES = {  # name: (config module, overrides)
    "tiny": ("tiny", {}),  # packed rows
    "tiny_bucketed": ("tiny", {"data.pack": False}),
    "default": ("default", {"data.embedded_train_size": 20_000}),  # Shapes do not depend on it.
    "gpt_tiny": ("gpt_tiny", {}),  # byte tokens
    "gpt_stdlib": ("gpt_stdlib", {}),
    "bert_tiny": ("bert_tiny", {}),
    "bert_stdlib_pretrain": ("bert_stdlib_pretrain", {}),
    "bert_bilingual_pretrain": ("bert_bilingual_pretrain", {}),  # numbers mixed in
    "bert_classify_tiny": ("bert_classify_tiny", {}),
    "bert_numbers_pair": ("bert_numbers_pair", {"init_from": ""}),
    "bert_stdlib_classify": ("bert_stdlib_classify", {"init_from": ""}),
    "vit_tiny": ("vit_tiny", {}),
    "vit_digits": ("vit_digits", {}),
}


def load_config(module: str, overrides: dict):
    config = importlib.import_module(f"configs.{module}").get_config()
    for dotted, value in overrides.items():
        *path, field = dotted.split(".")
        section = config
        for name in path:
            section = section[name]
        section[field] = value
    return config


def build(config, workdir) -> tasks.Task:
    cls = tasks.get(config.task)
    cls.validate(config)
    return cls(config, Workdir.at(workdir))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """case name -> (config, task), each built once in its own workdir."""
    cache = {}

    def get(case: str):
        if case not in cache:
            config = load_config(*CASES[case])
            cache[case] = config, build(config, tmp_path_factory.mktemp(case))
        return cache[case]

    return get


def train_batches(task: tasks.Task, bucketed: bool) -> list[dict]:
    """A whole epoch when buckets give several shapes, else a few batches."""
    iterator = task.train_iterator()
    count = iterator.batches_in_epoch if bucketed else 3
    return list(itertools.islice(iterator, count))


def assert_batches_match(spec: dict, batches: list[dict], tokens_per_batch: int | None = None):
    """Every batch has the spec's keys and dtypes, and its shapes. With `tokens_per_batch`
    (buckets): each batch is [B, L] with L <= the spec's length and B * L <= the budget, and
    some batch has the spec's shape."""
    assert batches
    seen = set()
    for batch in batches:
        assert batch.keys() == spec.keys()
        for key, value in batch.items():
            assert value.dtype == spec[key].dtype, (key, value.dtype, spec[key].dtype)
        if tokens_per_batch is None:
            assert {k: v.shape for k, v in batch.items()} == {k: s.shape for k, s in spec.items()}
        else:
            ((rows, length),) = {value.shape for value in batch.values()}
            seen.add((rows, length))
    if tokens_per_batch is not None:
        ((spec_rows, spec_length),) = {s.shape for s in spec.values()}
        assert all(length <= spec_length for _, length in seen), seen
        assert all(rows * length <= tokens_per_batch for rows, length in seen), seen
        assert (spec_rows, spec_length) in seen and len(seen) > 1, seen


def trained_tokenizer(config) -> bool:
    """Whether the run trains its tokenizer (then data.vocab_size is only an upper bound)."""
    data = config.data
    return (
        "vocab_size" in data
        and data.get("tokenizer") != "byte"
        and data.spm_model_path is None
        and not config.get("init_from")
    )


@pytest.mark.parametrize("case", list(CASES))
def test_spec_and_data_values_match_the_real_task(built, case):
    config, task = built(case)
    cls = type(task)
    bucketed = config.task == "translation" and not config.data.pack
    budget = config.data.tokens_per_batch if bucketed else None
    assert_batches_match(cls.batch_spec(config, "train"), train_batches(task, bucketed), budget)
    assert_batches_match(cls.batch_spec(config, "eval"), list(task.eval_batches()))
    assert cls.batch_spec(config, "test") == cls.batch_spec(config, "eval")

    abstract, real = cls.abstract_data_values(config), dict(task.data_values())
    assert abstract.keys() == real.keys()
    if trained_tokenizer(config):  # The documented upper bound, and the config's own value.
        assert real.pop("vocab_size") <= abstract.pop("vocab_size") == config.data.vocab_size
    assert abstract == real


def test_named_tokenizers_give_exact_vocabularies(built, tmp_path):
    _, task = built("tiny")
    config = load_config("tiny", {"data.spm_model_path": str(task.workdir.tokenizer_model)})
    assert config.data.vocab_size == 200 and task.data_values()["vocab_size"] < 200
    values = type(task).abstract_data_values(config)
    assert values == {"vocab_size": task.data_values()["vocab_size"], "max_len": 32}

    _, bert = built("bert_tiny")  # A pretraining workdir: fine-tuning takes its tokenizer.
    config = load_config("bert_classify_tiny", {"init_from": str(bert.workdir)})
    config.data.vocab_size = 300  # Not the pretrained tokenizer's (512): ignored.
    classifier = build(config, tmp_path)
    assert type(classifier).abstract_data_values(config) == dict(classifier.data_values())


def test_translation_rows_over_three_processes(built, tmp_path):
    """Global rows are a multiple of lcm(batch_multiple, processes): 24 of the longest bucket
    here (32 with one process); each host yields a third."""
    overrides = {"data.pack": False, "data.tokens_per_batch": 1024, "data.eval_batch_size": 48}
    config = load_config("tiny", overrides)
    _, task = built("tiny")
    spec = tasks.TranslationTask.batch_spec(config, "train", process_count=3)
    assert tasks.TranslationTask.batch_spec(config, "train")["src"].shape == (32, 32)
    assert spec["src"].shape == (24, 32)
    host = dict(process_index=1, process_count=3)
    iterator = translation_data.make_train_iterator(config.data, task.tokenizer, tmp_path, **host)
    longest = [
        b for b in itertools.islice(iterator, iterator.batches_in_epoch) if b["src"].shape[1] == 32
    ]
    assert longest and {b["src"].shape for b in longest} == {(8, 32)}
    evals = translation_data.make_eval_batches(config.data, task.tokenizer, "eval", **host)
    eval_spec = tasks.TranslationTask.batch_spec(config, "eval", process_count=3)
    assert {b["src"].shape for b in evals} == {(16, 32)} and eval_spec["src"].shape == (48, 32)


@pytest.mark.parametrize("module", ["wmt14_en_de_base", "wmt14_en_de_big"])
def test_wmt14_specs_need_no_data(module, monkeypatch):
    """25,000 tokens per side: 97 rows of 256 round down to 96 (batch_multiple 8), or to 64
    over 64 hosts; buckets, so no segment ids. Evaluation: 128 rows of 256."""
    for name in ("data_source", "builder", "load"):  # Any use of TFDS fails the test.
        monkeypatch.setattr(tfds, name, lambda *a, **k: pytest.fail("TFDS was asked for data"))
    config = load_config(module, {})
    cls = tasks.get(config.task)
    int32, float32 = np.dtype("int32"), np.dtype("float32")
    want = {k: (int32, (96, 256)) for k in ("src", "tgt_in", "tgt_out")} | {
        "weights": (float32, (96, 256))
    }
    got = {k: (s.dtype, s.shape) for k, s in cls.batch_spec(config).items()}
    assert got == want
    spec = cls.batch_spec(config, "train", process_count=64)
    assert {s.shape for s in spec.values()} == {(64, 256)}
    assert {s.shape for s in cls.batch_spec(config, "eval").values()} == {(128, 256)}
    assert all(isinstance(s, jax.ShapeDtypeStruct) for s in spec.values())
    assert cls.abstract_data_values(config) == {"vocab_size": 37_000, "max_len": 256}
    with pytest.raises(ValueError, match="split must be one of"):
        cls.batch_spec(config, "validation")


def test_classify_tsv_labels_come_from_the_model_section_or_a_stand_in():
    config = load_config("bert_classify_tiny", {"data.source": "tsv"})
    assert tasks.ClassificationTask.abstract_data_values(config)["num_labels"] == 2
    config.model.num_labels = 7
    assert tasks.ClassificationTask.abstract_data_values(config)["num_labels"] == 7


def test_image_folders(tmp_path):
    """Three class folders of 12x10 images: classes listed; the size is folder_size's, and
    without it only the model section can say it."""
    root = tmp_path / "images"
    for label, name in enumerate(("ant", "bee", "cow")):
        (root / name).mkdir(parents=True)
        for i in range(4):
            Image.new("L", (12, 10), 40 * label + i).save(root / name / f"{i}.png")
    overrides = {"data.source": "folder", "data.folder_train": str(root)}
    overrides |= {"data.folder_eval": str(root), "data.batch_size": 8}
    config = load_config("vit_tiny", overrides | {"data.eval_batch_size": 8})
    cls = tasks.ImageClassificationTask
    with pytest.raises(ValueError, match=r"image_height, image_width .*folder_size"):
        cls.abstract_data_values(config)
    config.model.image_height, config.model.image_width = 10, 12
    assert cls.batch_spec(config)["images"].shape == (8, 10, 12, 1)
    config.data.folder_size = 6
    assert cls.abstract_data_values(config) == {
        "num_classes": 3,
        "image_height": 6,
        "image_width": 6,
        "channels": 1,
    }
    task = build(config, tmp_path / "run")
    assert cls.abstract_data_values(config) == dict(task.data_values())
    assert_batches_match(cls.batch_spec(config), train_batches(task, False))
    assert_batches_match(cls.batch_spec(config, "eval"), list(task.eval_batches()))


def test_tfds_images_from_the_builder_metadata(tmp_path):
    overrides = {"data.source": "tfds", "data.tfds_name": "mnist", "data.batch_size": 8}
    config = load_config("vit_tiny", overrides | {"data.eval_batch_size": 8})
    cls = tasks.ImageClassificationTask
    with tfds.testing.mock_data(num_examples=20):
        values = cls.abstract_data_values(config)
        task = build(config, tmp_path)
        batches = train_batches(task, False)
    mnist = {"num_classes": 10, "image_height": 28, "image_width": 28, "channels": 1}
    assert values == dict(task.data_values()) == mnist
    assert_batches_match(cls.batch_spec(config), batches)
