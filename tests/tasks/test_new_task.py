"""A task added from outside the package: registered, trained by the loop and scored by the
evaluate command through the `Task` interface alone (nothing in training/ or the CLI knows it).

The toy task: copy a random sequence. Each row is `a b c ... | a b c ...`; a decoder-only model
learns to predict the second half from the first. Its own config field (`copy_marker`) lives
with the task.
"""

from __future__ import annotations

import json
import math

import jax
import ml_collections
import numpy as np
import pytest

from configs.common import run_config
from transformer_jax import models, sharding, tasks
from transformer_jax.aot import programs
from transformer_jax.cli import evaluate
from transformer_jax.tasks import losses
from transformer_jax.training import train_and_evaluate

VOCAB, HALF = 12, 6  # Tokens 4..11 are the symbols; 3 marks the middle.


def copy_rows(rng: np.random.Generator, rows: int, marker: int) -> dict[str, np.ndarray]:
    symbols = rng.integers(4, VOCAB, (rows, HALF))
    seq = np.concatenate([symbols, np.full((rows, 1), marker), symbols], axis=1)  # [B, 13]
    weights = np.zeros((rows, 2 * HALF), np.float32)
    weights[:, HALF:] = 1.0  # Only the copied half can be predicted.
    return {
        "inputs": seq[:, :-1].astype(np.int32),
        "targets": seq[:, 1:].astype(np.int32),
        "weights": weights,
    }


class CopyIterator:
    """Batches drawn from (seed, step): resumable by its step alone."""

    def __init__(self, seed: int, rows: int, marker: int):
        self.seed, self.rows, self.marker, self.step = seed, rows, marker, 0

    def __next__(self):
        self.step += 1
        return copy_rows(np.random.default_rng([self.seed, self.step]), self.rows, self.marker)

    def get_state(self):
        return {"step": self.step}

    def set_state(self, state):
        self.step = state["step"]


class CopyTask(tasks.Task):
    name = "test_copy"
    normalizer = "tokens"
    best_metric = "accuracy"
    best_mode = "max"

    @classmethod
    def add_config_fields(cls, config: ml_collections.ConfigDict) -> None:
        config.copy_marker = 3  # The token between a sequence and its copy.

    @classmethod
    def validate(cls, config):
        if config.copy_marker >= 4:
            raise ValueError("config.copy_marker must be below 4 (4.. are the symbols).")

    def data_values(self):
        return {"vocab_size": VOCAB}

    def train_iterator(self):
        cfg = self.config
        return CopyIterator(cfg.seed, cfg.data.batch_multiple, cfg.copy_marker)

    def eval_batches(self, split: str = "eval"):
        seed = {"eval": 1, "test": 2, "train": 3}[split]
        rng = np.random.default_rng(seed)
        return [copy_rows(rng, 16, self.config.copy_marker) for _ in range(2)]

    def loss_fn(self, model, batch, rng, deterministic):
        logits = model(batch["inputs"], rng=rng, deterministic=deterministic)
        sums = losses.token_metrics(logits, batch["targets"], batch["weights"], 0.0)
        return sums["loss_sum"], sums

    def summarize(self, sums):
        return losses.summarize(sums)


@pytest.fixture(scope="module")
def copy_task():
    tasks.register(CopyTask)
    return CopyTask


def test_register_refuses_a_taken_name_and_a_non_task(copy_task):
    assert tasks.register(copy_task) is copy_task  # the same class again is fine
    other = type("Other", (CopyTask,), {})
    with pytest.raises(ValueError, match="task name 'test_copy' is taken by CopyTask"):
        tasks.register(other)
    with pytest.raises(TypeError, match="Task subclass"):
        tasks.register(dict)


def test_a_new_task_trains_and_is_evaluated_through_the_interface(copy_task, tmp_path, capsys):
    model = models.config_section("decoder_only", "tiny")
    model.max_len = 2 * HALF
    data = ml_collections.ConfigDict({"batch_multiple": 16, "max_len": 2 * HALF})
    config = run_config("test_copy", model, data)
    assert config.copy_marker == 3 and "label_smoothing" not in config
    config.update(
        num_train_steps=40, warmup_steps=10, lr_factor=2.0, log_every=20, eval_every=40,
        checkpoint_every=40,
    )  # fmt: skip
    result = train_and_evaluate(config, str(tmp_path))
    # It learned at least which tokens can come (8 symbols: log 8 < log 12).
    assert result["step"] == 40 and result["test"]["loss"] < math.log(8) + 0.05

    assert evaluate.main([f"--workdir={tmp_path}", "--split=test"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("step 40, test: loss ")
    record = json.loads((tmp_path / "eval" / "test.step40.scores.json").read_text())
    assert record["steps"] == [40]
    assert record["accuracy"] == pytest.approx(result["test"]["accuracy"], abs=1e-6)


def test_a_task_without_batch_shapes_cannot_be_compiled_ahead_of_time_and_says_why(copy_task):
    model = models.config_section("decoder_only", "tiny")
    data = ml_collections.ConfigDict({"batch_multiple": 16, "max_len": 2 * HALF})
    config = run_config("test_copy", model, data)
    mesh = sharding.make_mesh({"data": 1}, devices=jax.devices()[:1])
    with pytest.raises(ValueError, match=r"CopyTask.abstract_data_values.*define them on"):
        programs.plan(config, mesh)
