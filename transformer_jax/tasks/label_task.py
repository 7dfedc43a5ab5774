"""What every task with one label per example shares (text and image classification): the
metrics, the best checkpoint, labels.json, and a split's report with its baselines.

Metric sums carry the confusion matrix (`label_sums`), so accuracy and macro-F1 add up exactly
over batches and devices; the best checkpoint is the one with the highest validation accuracy.
A split's report is the model's figures, the baselines' beside them (`config.baselines`), and
the confusion matrix.
"""

from __future__ import annotations

import abc
import json
import time
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from transformer_jax import sharding as shd
from transformer_jax import storage
from transformer_jax.tasks.base import ScoreOptions, SplitScores, Task, check_split
from transformer_jax.tasks.label_sums import confusion_table, describe, label_summary
from transformer_jax.tasks.split_scores import split_sums

NO_SKLEARN = "  baselines skipped: scikit-learn is not installed (pip install scikit-learn)."


class LabelTask(Task):
    """A classification task: one label per example, `dataset.label_names` its classes.

    Subclasses set `dataset` (with `label_names` and `splits`) in their constructor, then call
    `write_labels`; they give `labels_info` (what inference needs besides the label names),
    `baseline_lines` and `example_spec`.
    """

    normalizer = "examples"
    best_metric = "accuracy"
    best_mode = "max"
    example_noun: ClassVar[str] = "examples"  # How the report counts them ("images").
    dataset: Any

    @classmethod
    def add_config_fields(cls, config: ml_collections.ConfigDict) -> None:
        config.baselines = True  # At the test, the task's baselines beside the model's figures.

    @classmethod
    def check_baselines(cls, config: ml_collections.ConfigDict) -> None:
        if not isinstance(config.get("baselines"), bool):
            raise ValueError(
                f"config.baselines must be True or False, got {config.get('baselines')!r}."
            )

    @classmethod
    def batch_spec(cls, config, split="train", *, process_count=1):
        """`example_spec`, `labels` int32 [B] and `weights` float32 [B] (data/labelled_batches.py),
        B = data.batch_size for "train", data.eval_batch_size for "eval". One shape per split."""
        check_split(split)
        rows = config.data.batch_size if split == "train" else config.data.eval_batch_size
        return {
            **cls.example_spec(config, rows),
            "labels": jax.ShapeDtypeStruct((rows,), jnp.int32),
            "weights": jax.ShapeDtypeStruct((rows,), jnp.float32),
        }

    @classmethod
    @abc.abstractmethod
    def example_spec(
        cls, config: ml_collections.ConfigDict, rows: int
    ) -> dict[str, jax.ShapeDtypeStruct]:
        """The inputs of a batch of `rows` examples (besides labels and weights)."""

    @staticmethod
    @abc.abstractmethod
    def probabilities_program():
        """The jitted serving function `f(graphdef, params, *inputs)` -> class probabilities,
        its inputs in `example_spec`'s order."""

    def serving_program(self):
        """The program this run's front end serves (`probabilities_program` unless the config
        asks for another, e.g. test-time flips)."""
        return self.probabilities_program()

    def inference_programs(self, graphdef, params, mesh):
        """The classifier's forward pass (class probabilities) over `data.eval_batch_size`
        examples."""
        rows = self.config.data.eval_batch_size
        inputs = [shd.abstract_input(v.shape, v.dtype, mesh)
                  for v in self.example_spec(self.config, rows).values()]  # fmt: skip
        program = self.serving_program()
        unit = "image" if any(len(v.shape) == 4 for v in inputs) else "row"
        return {"forward": (lambda: program.lower(graphdef, params, *inputs), rows, unit)}

    @abc.abstractmethod
    def labels_info(self) -> dict[str, Any]:
        """labels.json's fields besides the label names (e.g. whether inputs are pairs)."""

    @abc.abstractmethod
    def baseline_lines(self, split: str, metrics: dict[str, Any]) -> list[str]:
        """Report lines of the baselines fitted on the training split and scored on `split`;
        their figures go into `metrics`."""

    def write_labels(self) -> None:
        """Writes workdir/labels.json: the label names and `labels_info` (process 0)."""
        if jax.process_index() == 0:
            labels = {"label_names": list(self.dataset.label_names), **self.labels_info()}
            storage.write_text_atomic(self.workdir.labels_json, json.dumps(labels, indent=1))

    def summarize(self, sums):
        return label_summary(sums)

    def score_split(
        self,
        model: nnx.Module,
        split: str,
        *,
        mesh: Mesh,
        options: ScoreOptions | None = None,
    ) -> SplitScores | None:
        """Accuracy (top-5 beyond five classes), macro-F1 and the confusion matrix of a split,
        beside the baselines; None for an empty split."""
        options = options or ScoreOptions()
        started = time.time()
        sums = split_sums(self.loss_fn, model, self.eval_batches(split), mesh)
        if sums is None:
            return None
        metrics = label_summary(sums)
        confusion = np.rint(np.asarray(sums["confusion"])).astype(int)
        metrics["confusion"] = confusion.tolist()
        lines = [
            f"{metrics['examples']:.0f} {split} {self.example_noun} "
            f"({time.time() - started:.0f} s): {describe(metrics)}"
        ]
        if self.config.baselines if options.baselines is None else options.baselines:
            lines += self.baseline_lines(split, metrics)
        names = tuple(self.dataset.label_names)
        lines.append(confusion_table(confusion, names))
        return SplitScores(metrics, "\n".join(lines), self.score_kind, label_names=names)
