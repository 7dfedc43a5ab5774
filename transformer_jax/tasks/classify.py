"""Sequence and sentence-pair classification with the encoder (BERT fine-tuning, §4 of Devlin
et al. 2019): a linear head on the pooled `[CLS]` output (or, with model.pool="mean",
the mean of the tokens' outputs), cross-entropy over the labels.

Batches from `transformer_jax.data.classify.pipeline`; metrics, the best checkpoint and the
report are every label task's (`LabelTask`). With `config.init_from` the encoder starts from a
pretraining run and only the heads are new (`fresh_params`). At the test, the model's figures
are printed beside TF-IDF + logistic regression fitted on the same training split.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from transformer_jax.data.bert.inputs import real_tokens
from transformer_jax.data.classify import config as classify_config
from transformer_jax.data.classify import numbers_pair, pipeline, stdlib_packages
from transformer_jax.data.tokenizer import configured_vocab_size
from transformer_jax.inference import classifier
from transformer_jax.runs.layout import Workdir
from transformer_jax.tasks import classify_baselines
from transformer_jax.tasks.base import check_positions
from transformer_jax.tasks.label_sums import label_sums
from transformer_jax.tasks.label_task import NO_SKLEARN, LabelTask
from transformer_jax.tasks.pretrained import add_init_from, check_init_from
from transformer_jax.tasks.shared_fields import check_shared_fields

ANALYZERS = ("char", "word")
TSV_LABELS_STAND_IN = 2  # A TSV file's label set is only known from the file.


def classify_loss(
    model: nnx.Module, batch: dict[str, jax.Array], rng: jax.Array | None, deterministic: bool
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(summed cross-entropy, metric sums incl. the confusion matrix [K, K]) of a batch."""
    hidden = model(
        batch["inputs"],
        batch["segment_ids"],
        attention_mask=real_tokens(batch["inputs"]),
        rng=None if rng is None else jax.random.fold_in(rng, 0),
        deterministic=deterministic,
    )
    logits = model.classify(
        model.pool(hidden, real_tokens(batch["inputs"])),
        rng=None if rng is None else jax.random.fold_in(rng, 1),
        deterministic=deterministic,
    )  # [B, K]
    sums = label_sums(logits, batch["labels"], batch["weights"])
    return sums["loss_sum"], sums


class ClassificationTask(LabelTask):
    """Classify texts or text pairs with the encoder-only model's `[CLS]` output."""

    name = "classify"
    absolute_data_paths = staticmethod(classify_config.with_absolute_paths)
    score_kind = "classify"
    model_defining_data_fields = (
        "source",
        "tsv_train",
        "spm_model_path",
        "vocab_size",
        "numbers_lang",
    )
    fresh_params = ("sequence_head", "token_head")
    fresh_fields = ("num_labels", "pool")  # The head's size, and what it reads.
    init_from_hints = {
        "vocab_size": "leave config.model.vocab_size unset: the pretrained tokenizer's "
        "({value}) is taken",
    }

    @classmethod
    def add_config_fields(cls, config: ml_collections.ConfigDict) -> None:
        super().add_config_fields(config)  # baselines: TF-IDF + logistic regression
        add_init_from(config)  # The pretraining workdir; '': from scratch.
        config.baseline_analyzer = "char"  # Baseline n-grams: "char" (1-4) or "word" (1-2).

    @classmethod
    def validate(cls, config: ml_collections.ConfigDict) -> None:
        check_shared_fields(config, cls.name, "encoder_only")
        classify_config.validate_classify_data_config(config.data)
        check_positions(config)
        check_init_from(config)
        if config.get("baseline_analyzer") not in ANALYZERS:
            raise ValueError(
                f"config.baseline_analyzer must be one of {ANALYZERS}, got "
                f"{config.get('baseline_analyzer')!r}."
            )
        cls.check_baselines(config)

    def __init__(self, config: ml_collections.ConfigDict, workdir: Workdir):
        super().__init__(config, workdir)
        self.dataset = pipeline.load_dataset(config.data, workdir.cache)
        self.tokenizer = pipeline.load_classify_tokenizer(
            config.data, workdir, self.dataset, config.get("init_from") or None
        )
        self._encoded: dict[str, pipeline.EncodedSplit] = {}
        self.write_labels()

    def labels_info(self) -> dict[str, Any]:
        return {"pair": self.dataset.is_pair}

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

    @classmethod
    def abstract_data_values(cls, config: ml_collections.ConfigDict) -> dict[str, Any]:
        """vocab_size: the pieces of the tokenizer the config names (`init_from`'s
        tokenizer.model, else `data.spm_model_path`), else `data.vocab_size`, an upper bound
        (a small corpus trains fewer pieces). num_labels: 2 for numbers_pair, 5 for
        stdlib_packages; a TSV's labels are only known from its file: config.model.num_labels
        when set, else a stand-in of 2 (set config.model.num_labels for the true head)."""
        data = config.data
        init_from = config.get("init_from")
        named = Workdir.at(init_from).tokenizer_model if init_from else data.spm_model_path
        if data.source == "numbers_pair":
            num_labels = len(numbers_pair.LABEL_NAMES)
        elif data.source == "stdlib_packages":
            num_labels = len(set(stdlib_packages.PACKAGES))
        else:
            num_labels = config.model.get("num_labels") or TSV_LABELS_STAND_IN
        return {
            "vocab_size": configured_vocab_size(data.vocab_size, named),
            "num_labels": num_labels,
        }

    @classmethod
    def example_spec(cls, config, rows):
        """`inputs` and `segment_ids`, int32 [rows, data.max_len]."""
        shape = (rows, config.data.max_len)
        return {k: jax.ShapeDtypeStruct(shape, jnp.int32) for k in ("inputs", "segment_ids")}

    @staticmethod
    def probabilities_program():
        return classifier.probabilities_program

    def train_iterator(self):
        return pipeline.ClassifyTrainIterator(self.encoded("train"), self.config.data)

    def eval_batches(self, split: str = "eval"):
        if not self.dataset.splits[split]:
            return []
        return pipeline.eval_batches(self.encoded(split), self.config.data)

    def loss_fn(self, model, batch, rng, deterministic):
        return classify_loss(model, batch, rng, deterministic)

    def baseline_lines(self, split: str, metrics: dict) -> list[str]:
        """TF-IDF + logistic regression, fitted on the training split (config.baseline_analyzer)."""
        analyzer = self.config.baseline_analyzer
        if not classify_baselines.HAVE_SKLEARN:
            return [NO_SKLEARN]
        base = classify_baselines.tfidf_logistic_regression(
            self.dataset.splits["train"], self.dataset.splits[split], analyzer=analyzer
        )
        metrics["baseline_accuracy"] = base["accuracy"]
        metrics["baseline_macro_f1"] = base["macro_f1"]
        return [
            f"  TF-IDF ({analyzer} n-grams) + logistic regression, same split: accuracy "
            f"{100 * base['accuracy']:.2f}%, macro-F1 {100 * base['macro_f1']:.2f}%"
        ]
