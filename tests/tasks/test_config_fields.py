"""Every config holds the fields of the loop and of its own task, and nothing else: a field a
task does not read (an "unused" field) cannot creep into a config."""

import importlib
import pathlib

import ml_collections
import pytest

from configs.common import training_fields
from transformer_jax import tasks

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = sorted(
    p.stem for p in (ROOT / "configs").glob("*.py") if "def get_config" in p.read_text()
)


def own_fields(task: str) -> set[str]:
    fields = ml_collections.ConfigDict()
    tasks.get(task).add_config_fields(fields)
    return set(fields.keys())


@pytest.mark.parametrize("name", CONFIGS)
def test_a_config_has_the_loop_and_task_fields_only(name):
    config = importlib.import_module(f"configs.{name}").get_config()
    loop = set(training_fields(ml_collections.ConfigDict()).keys())
    expected = {"task", "model", "data"} | loop | own_fields(config.task)
    assert set(config.keys()) == expected, set(config.keys()) ^ expected


def test_task_fields_belong_to_the_tasks_that_read_them():
    assert "label_smoothing" in own_fields("translation") & own_fields("image_classify")
    assert "label_smoothing" not in own_fields("bert_pretrain") | own_fields("classify")
    assert {"init_from", "baseline_analyzer", "baselines"} <= own_fields("classify")
    assert own_fields("bert_pretrain") == {"init_from", "init_fresh"}  # to continue a run
    assert not own_fields("translation") & set(training_fields(ml_collections.ConfigDict()))


def test_the_bilingual_pretraining_is_the_stdlib_one_with_numbers():
    stdlib = importlib.import_module("configs.bert_stdlib_pretrain").get_config().to_dict()
    bilingual = importlib.import_module("configs.bert_bilingual_pretrain").get_config().to_dict()
    added = {"mix_numbers": 2500, "mix_numbers_negatives": "numbers"}
    assert {k: bilingual["data"][k] for k in added} == added
    assert bilingual == {**stdlib, "data": {**stdlib["data"], **added}}
