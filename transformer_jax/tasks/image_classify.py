"""Image classification with the Vision Transformer: cross-entropy (optionally label-smoothed)
over the classes, accuracy (and top-5 beyond 5 classes) and macro-F1.

Batches from `transformer_jax.data.images.pipeline`: `images` float32 [B, H, W, C] in [0, 1],
`labels` int32 [B], `weights` float32 [B]. The best checkpoint is the one with the highest
validation accuracy. At the test, the model's figures are printed beside an RBF SVC and logistic
regression on the raw pixels of the same split, fitted on the same training images.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping
from typing import Any

import jax
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from transformer_jax import storage
from transformer_jax.data.images import config as image_config
from transformer_jax.data.images import pipeline
from transformer_jax.tasks import image_baselines
from transformer_jax.tasks.base import Task
from transformer_jax.tasks.label_sums import confusion_table, label_summary, label_sums
from transformer_jax.tasks.shared_fields import check_shared_fields
from transformer_jax.tasks.split_scores import split_sums
from transformer_jax.workdir import Workdir


def image_loss(
    model: nnx.Module,
    batch: dict[str, jax.Array],
    rng: jax.Array | None,
    deterministic: bool,
    smoothing: float = 0.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(summed smoothed cross-entropy, metric sums incl. the confusion matrix) of a batch."""
    logits = model(batch["images"], rng=rng, deterministic=deterministic)  # [B, K]
    sums = label_sums(logits, batch["labels"], batch["weights"], smoothing=smoothing)
    return sums["loss_sum"], sums


def describe(metrics: Mapping[str, float]) -> str:
    """`accuracy 97.5%, top-5 99.9%, macro-F1 97.4%`."""
    parts = [f"accuracy {100 * metrics['accuracy']:.2f}%"]
    if "top5_accuracy" in metrics:
        parts.append(f"top-5 {100 * metrics['top5_accuracy']:.2f}%")
    parts.append(f"macro-F1 {100 * metrics['macro_f1']:.2f}%")
    return ", ".join(parts)


class ImageClassificationTask(Task):
    """Classify images with the ViT's [CLS] (or mean-pooled) output."""

    name = "image_classify"
    normalizer = "examples"
    best_metric = "accuracy"
    best_mode = "max"
    model_defining_data_fields = (
        "source",
        "tfds_name",
        "folder_train",
        "folder_size",
        "folder_channels",
    )

    @classmethod
    def validate(cls, config: ml_collections.ConfigDict) -> None:
        check_shared_fields(config, cls.name, "vit")
        image_config.validate_image_data_config(config.data)
        if not isinstance(config.get("baselines"), bool):
            raise ValueError(
                f"config.baselines must be True or False, got {config.get('baselines')!r}."
            )
        max_train = config.get("baseline_max_train")
        if isinstance(max_train, bool) or not isinstance(max_train, int) or max_train < 1:
            raise ValueError(
                f"config.baseline_max_train must be a positive integer, got {max_train!r}."
            )

    @classmethod
    def resolve_config(cls, config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
        config = copy.deepcopy(config)
        config.data = image_config.with_absolute_paths(config.data)
        return config

    def __init__(self, config: ml_collections.ConfigDict, workdir: Workdir):
        super().__init__(config, workdir)
        self.dataset = pipeline.load_image_dataset(config.data)
        for split, images in self.dataset.splits.items():
            pipeline.log_split(split, images)
        if jax.process_index() == 0:
            labels = {
                "label_names": list(self.dataset.label_names),
                "image_shape": list(self.dataset.image_shape),
            }
            storage.write_text_atomic(workdir.labels_json, json.dumps(labels, indent=1))

    def data_values(self) -> Mapping[str, Any]:
        height, width, channels = self.dataset.image_shape
        return {
            "num_classes": self.dataset.num_classes,
            "image_height": height,
            "image_width": width,
            "channels": channels,
        }

    def train_iterator(self):
        return pipeline.ImageTrainIterator(self.dataset.splits["train"], self.config.data)

    def eval_batches(self, split: str = "eval"):
        if not len(self.dataset.splits[split]):
            return []
        return pipeline.image_eval_batches(self.dataset.splits[split], self.config.data)

    def loss_fn(self, model, batch, rng, deterministic):
        return image_loss(model, batch, rng, deterministic, float(self.config.label_smoothing))

    def summarize(self, sums):
        return label_summary(sums)

    def evaluate(self, model: nnx.Module, split: str, *, mesh: Mesh):
        """ "test": accuracy, macro-F1 and the confusion matrix beside the pixel baselines."""
        if split == "eval":
            return {}, None
        return self.score_split(model, split, mesh=mesh)

    def score_split(self, model: nnx.Module, split: str, *, mesh: Mesh, baselines=None):
        """A split's figures and report; ({}, None) for an empty split."""
        started = time.time()
        sums = split_sums(self.loss_fn, model, self.eval_batches(split), mesh)
        if sums is None:
            return {}, None
        metrics = label_summary(sums)
        confusion = np.rint(np.asarray(sums["confusion"])).astype(int)
        metrics["confusion"] = confusion.tolist()
        lines = [
            f"{metrics['examples']:.0f} {split} images ({time.time() - started:.0f} s): ViT "
            f"{describe(metrics)}"
        ]
        if self.config.baselines if baselines is None else baselines:
            lines += self._baseline_lines(split, metrics)
        lines.append(confusion_table(confusion, self.dataset.label_names))
        return metrics, "\n".join(lines)

    def _baseline_lines(self, split: str, metrics: dict) -> list[str]:
        if not image_baselines.HAVE_SKLEARN:
            return [
                "  baselines skipped: scikit-learn is not installed (pip install scikit-learn)."
            ]
        scores = image_baselines.pixel_baselines(
            self.dataset.splits["train"],
            self.dataset.splits[split],
            self.dataset.num_classes,
            max_train=self.config.baseline_max_train,
        )
        lines = []
        for name, score in scores.items():
            metrics[f"{name}_accuracy"] = score["accuracy"]
            metrics[f"{name}_macro_f1"] = score["macro_f1"]
            lines.append(
                f"  {image_baselines.NAMES[name]} on raw pixels, same split: accuracy "
                f"{100 * score['accuracy']:.2f}%, macro-F1 {100 * score['macro_f1']:.2f}% "
                f"({score['seconds']:.1f} s)"
            )
        return lines
