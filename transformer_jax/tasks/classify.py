"""Sequence and sentence-pair classification with the encoder (BERT fine-tuning, §4 of Devlin
et al. 2019): a linear head on the pooled `[CLS]` output, cross-entropy over the labels.

Batches from `transformer_jax.data.classify.pipeline`. Metric sums carry the confusion matrix,
so accuracy and macro-F1 add up exactly over batches and devices; the best checkpoint is the one
with the highest validation accuracy. With `config.init_from` the encoder starts from a
pretraining run and only the heads are new (`fresh_params`). At the test, the model's figures
are printed beside TF-IDF + logistic regression fitted on the same training split.
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
from transformer_jax.data.classify import config as classify_config
from transformer_jax.data.classify import pipeline
from transformer_jax.tasks import classify_baselines
from transformer_jax.tasks.base import Task, check_positions
from transformer_jax.tasks.label_sums import confusion_table, label_summary, label_sums
from transformer_jax.tasks.shared_fields import check_shared_fields
from transformer_jax.tasks.split_scores import split_sums
from transformer_jax.workdir import Workdir

ANALYZERS = ("char", "word")


def classify_loss(
    model: nnx.Module, batch: dict[str, jax.Array], rng: jax.Array | None, deterministic: bool
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(summed cross-entropy, metric sums incl. the confusion matrix [K, K]) of a batch."""
    hidden = model(
        batch["inputs"],
        batch["segment_ids"],
        rng=None if rng is None else jax.random.fold_in(rng, 0),
        deterministic=deterministic,
    )
    logits = model.classify(
        model.pool(hidden),
        rng=None if rng is None else jax.random.fold_in(rng, 1),
        deterministic=deterministic,
    )  # [B, K]
    sums = label_sums(logits, batch["labels"], batch["weights"])
    return sums["loss_sum"], sums


class ClassificationTask(Task):
    """Classify texts or text pairs with the encoder-only model's `[CLS]` output."""

    name = "classify"
    normalizer = "examples"
    best_metric = "accuracy"
    best_mode = "max"
    model_defining_data_fields = (
        "source",
        "tsv_train",
        "spm_model_path",
        "vocab_size",
        "numbers_lang",
    )
    fresh_params = ("sequence_head", "token_head")

    @classmethod
    def validate(cls, config: ml_collections.ConfigDict) -> None:
        check_shared_fields(config, cls.name, "encoder_only")
        classify_config.validate_classify_data_config(config.data)
        check_positions(config)
        init_from = config.get("init_from")
        if init_from is not None and not isinstance(init_from, str):
            raise ValueError(f"config.init_from must be a workdir path or '', got {init_from!r}.")
        if config.get("baseline_analyzer") not in ANALYZERS:
            raise ValueError(
                f"config.baseline_analyzer must be one of {ANALYZERS}, got "
                f"{config.get('baseline_analyzer')!r}."
            )
        if not isinstance(config.get("baselines"), bool):
            raise ValueError(f"config.baselines must be True or False, got {config.baselines!r}.")

    @classmethod
    def resolve_config(cls, config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
        config = copy.deepcopy(config)
        config.data = classify_config.with_absolute_paths(config.data)
        if config.get("init_from"):
            config.init_from = str(storage.as_path(config.init_from))
        return config

    def __init__(self, config: ml_collections.ConfigDict, workdir: Workdir):
        super().__init__(config, workdir)
        self.dataset = pipeline.load_dataset(config.data, workdir.cache)
        self.tokenizer = pipeline.load_classify_tokenizer(
            config.data, workdir, self.dataset, config.get("init_from") or None
        )
        self._encoded: dict[str, pipeline.EncodedSplit] = {}
        if jax.process_index() == 0:
            labels = {"label_names": list(self.dataset.label_names), "pair": self.dataset.is_pair}
            storage.write_text_atomic(workdir.labels_json, json.dumps(labels, indent=1))

    def encoded(self, split: str) -> pipeline.EncodedSplit:
        """A split's examples as rows (encoded once per run)."""
        if split not in self._encoded:
            encoded = pipeline.encode_examples(
                self.tokenizer, self.dataset.splits[split], self.config.data.max_len
            )
            pipeline.log_split(split, encoded, self.config.data.max_len)
            self._encoded[split] = encoded
        return self._encoded[split]

    def data_values(self) -> Mapping[str, Any]:
        return {
            "vocab_size": self.tokenizer.vocab_size,
            "num_labels": len(self.dataset.label_names),
        }

    def train_iterator(self):
        return pipeline.ClassifyTrainIterator(self.encoded("train"), self.config.data)

    def eval_batches(self, split: str = "eval"):
        if not self.dataset.splits[split]:
            return []
        return pipeline.eval_batches(self.encoded(split), self.config.data)

    def loss_fn(self, model, batch, rng, deterministic):
        return classify_loss(model, batch, rng, deterministic)

    def summarize(self, sums):
        return label_summary(sums)

    def evaluate(self, model: nnx.Module, split: str, *, mesh: Mesh):
        """ "test" (or any split from the evaluate CLI): accuracy, macro-F1 and the confusion
        matrix, beside TF-IDF + logistic regression (config.baselines); nothing more at the
        loop's "eval" step (it has the validation metrics already)."""
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
        names = self.dataset.label_names
        lines = [
            f"{metrics['examples']:.0f} {split} examples ({time.time() - started:.0f} s): "
            f"accuracy {100 * metrics['accuracy']:.1f}%, macro-F1 {100 * metrics['macro_f1']:.1f}%"
        ]
        if self.config.baselines if baselines is None else baselines:
            lines.append(self._baseline_line(split, metrics))
        lines.append(confusion_table(confusion, names))
        return metrics, "\n".join(lines)

    def _baseline_line(self, split: str, metrics: dict) -> str:
        analyzer = self.config.baseline_analyzer
        if not classify_baselines.HAVE_SKLEARN:
            return "  baseline skipped: scikit-learn is not installed (pip install scikit-learn)."
        base = classify_baselines.tfidf_logistic_regression(
            self.dataset.splits["train"], self.dataset.splits[split], analyzer=analyzer
        )
        metrics["baseline_accuracy"], metrics["baseline_macro_f1"] = (
            base["accuracy"],
            base["macro_f1"],
        )
        return (
            f"  TF-IDF ({analyzer} n-grams) + logistic regression, same split: accuracy "
            f"{100 * base['accuracy']:.1f}%, macro-F1 {100 * base['macro_f1']:.1f}%"
        )
