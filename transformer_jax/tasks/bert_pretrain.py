"""BERT pretraining: masked LM + next-sentence prediction (Devlin et al. 2019, §3.1).

Batches from `transformer_jax.data.bert.pipeline`. The loss is the mean masked-LM
cross-entropy over the selected positions plus the mean NSP cross-entropy over the pairs, as
in BERT. The best checkpoint is the one with the highest validation masked-LM accuracy. At the
test, the masked-LM accuracy is printed beside a baseline that always predicts the most
frequent training token, and NSP beside chance (50%). `config.init_from` continues another
pretraining run (its parameters and tokenizer) on this config's text: domain-adaptive
pretraining (Gururangan et al. 2020).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from transformer_jax import sharding as shd
from transformer_jax.data.bert import config as bert_config
from transformer_jax.data.bert import pipeline
from transformer_jax.data.bert.inputs import real_tokens
from transformer_jax.inference import fill_mask
from transformer_jax.runs.layout import Workdir
from transformer_jax.tasks import losses, pretrained
from transformer_jax.tasks.base import (
    ScoreOptions,
    SplitScores,
    check_positions,
    check_split,
)
from transformer_jax.tasks.corpus_task import CorpusTask
from transformer_jax.tasks.shared_fields import check_shared_fields
from transformer_jax.tasks.split_scores import split_sums
from transformer_jax.tokens import FIRST_REGULAR_ID


def pretrain_loss(
    model: nnx.Module, batch: dict[str, jax.Array], rng: jax.Array | None, deterministic: bool
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(summed loss, metric sums) of a pretraining batch (keys: see data/bert/pipeline.py).

    The returned loss is divided by `mlm_tokens` by the step; the NSP part is scaled by
    mlm_tokens / pairs so that the quotient is mean MLM loss + mean NSP loss.
    """
    real = real_tokens(batch["inputs"])
    hidden = model(
        batch["inputs"],
        batch["segment_ids"],
        attention_mask=real,
        rng=rng,
        deterministic=deterministic,
    )
    picked = jnp.take_along_axis(hidden, batch["mlm_positions"][..., None], axis=1)  # [B, P, D]
    mlm = losses.token_metrics(
        model.mlm_logits(picked), batch["mlm_targets"], batch["mlm_weights"], 0.0
    )
    nsp_logits = model.nsp_logits(model.pool(hidden, real))  # [B, 2]
    nsp_weights = batch["nsp_weights"].astype(jnp.float32)
    nsp_nll = -jnp.take_along_axis(
        jax.nn.log_softmax(nsp_logits), batch["nsp_labels"][:, None], axis=-1
    )[:, 0]
    nsp_correct = (jnp.argmax(nsp_logits, -1) == batch["nsp_labels"]).astype(jnp.float32)
    sums = {
        "mlm_loss_sum": mlm["nll_sum"],
        "mlm_correct": mlm["correct_sum"],
        "mlm_tokens": mlm["tokens"],
        "nsp_loss_sum": (nsp_nll * nsp_weights).sum(),
        "nsp_correct": (nsp_correct * nsp_weights).sum(),
        "pairs": nsp_weights.sum(),
    }
    ratio = jax.lax.stop_gradient(sums["mlm_tokens"] / jnp.maximum(sums["pairs"], 1.0))
    return sums["mlm_loss_sum"] + ratio * sums["nsp_loss_sum"], sums


def pretrain_summary(sums: Mapping[str, Any]) -> dict[str, float]:
    """Masked-LM loss, accuracy and perplexity, NSP loss and accuracy, and their loss sum."""
    tokens, pairs = max(float(sums["mlm_tokens"]), 1.0), max(float(sums["pairs"]), 1.0)
    mlm_loss, nsp_loss = float(sums["mlm_loss_sum"]) / tokens, float(sums["nsp_loss_sum"]) / pairs
    return {
        "loss": mlm_loss + nsp_loss,
        "mlm_loss": mlm_loss,
        "mlm_accuracy": float(sums["mlm_correct"]) / tokens,
        "mlm_perplexity": float(np.exp(min(mlm_loss, 50.0))),
        "nsp_loss": nsp_loss,
        "nsp_accuracy": float(sums["nsp_correct"]) / pairs,
        "mlm_tokens": float(sums["mlm_tokens"]),
        "pairs": float(sums["pairs"]),
    }


def most_frequent_token_accuracy(train_ids: np.ndarray, batches) -> float:
    """Masked-LM accuracy of always predicting the most frequent ordinary training token."""
    counts = np.bincount(train_ids[train_ids >= FIRST_REGULAR_ID])
    guess = int(np.argmax(counts))
    hits = sum(float(((b["mlm_targets"] == guess) * b["mlm_weights"]).sum()) for b in batches)
    total = sum(float(b["mlm_weights"].sum()) for b in batches)
    return hits / max(total, 1.0)


class BertPretrainTask(CorpusTask):
    """Masked LM + next-sentence prediction with the encoder-only model (BERT)."""

    name = "bert_pretrain"
    normalizer = "mlm_tokens"
    best_metric = "mlm_accuracy"
    best_mode = "max"
    score_kind = "bert"

    @classmethod
    def add_config_fields(cls, config: ml_collections.ConfigDict) -> None:
        pretrained.add_init_from(config)  # A pretraining run to continue; '': from scratch.

    @classmethod
    def validate(cls, config: ml_collections.ConfigDict) -> None:
        check_shared_fields(config, cls.name, "encoder_only")
        bert_config.validate_bert_data_config(config.data)
        pretrained.check_init_from(config)
        check_positions(config)
        if config.model.type_vocab_size < 2:
            raise ValueError(
                f"config.model.type_vocab_size={config.model.type_vocab_size}: pairs need 2 "
                f"segments."
            )

    def __init__(self, config: ml_collections.ConfigDict, workdir: Workdir):
        super().__init__(config, workdir)
        init_from = config.get("init_from") or None
        if init_from:
            if config.data.get("mix_numbers_in_tokenizer", False):
                raise ValueError(
                    f"config.data.mix_numbers_in_tokenizer=True, but config.init_from="
                    f"{init_from!r} brings its own tokenizer, which its embeddings fit. Leave "
                    f"mix_numbers_in_tokenizer False when continuing a run, or unset init_from."
                )
            self.tokenizer = pretrained.pretrained_tokenizer(
                config.data, workdir, init_from, self.name
            )
            pipeline.check_bert_tokenizer(self.tokenizer, init_from)
        else:
            self.tokenizer = pipeline.load_bert_tokenizer(config.data, workdir)

    def data_values(self) -> Mapping[str, Any]:
        return {"vocab_size": self.tokenizer.vocab_size}

    @classmethod
    def batch_spec(cls, config, split="train", *, process_count=1):
        """The keys of data/bert/pipeline.py: [B, T] inputs and segment ids, [B, P] masked
        positions, targets and weights, [B] NSP labels and weights. B = `rows_per_batch`
        (tokens_per_batch / max_len, down to batch_multiple) for "train", data.eval_batch_size
        for "eval"; T = data.max_len; P = `max_predictions` (mask_rate of a row, rounded up)."""
        check_split(split)
        data = config.data
        b = cls.batch_rows(data, split)
        t, p = data.max_len, bert_config.max_predictions(data)
        i32, f32 = jnp.int32, jnp.float32
        shapes = {
            "inputs": ((b, t), i32),
            "segment_ids": ((b, t), i32),
            "mlm_positions": ((b, p), i32),
            "mlm_targets": ((b, p), i32),
            "mlm_weights": ((b, p), f32),
            "nsp_labels": ((b,), i32),
            "nsp_weights": ((b,), f32),
        }
        return {k: jax.ShapeDtypeStruct(shape, dtype) for k, (shape, dtype) in shapes.items()}

    def train_iterator(self):
        return pipeline.make_bert_train_iterator(self.config.data, self.tokenizer, self.workdir)

    def eval_batches(self, split: str = "eval"):
        return pipeline.make_bert_eval_batches(
            self.config.data, self.tokenizer, split, self.workdir
        )

    def loss_fn(self, model, batch, rng, deterministic):
        return pretrain_loss(model, batch, rng, deterministic)

    def summarize(self, sums):
        return pretrain_summary(sums)

    def inference_programs(self, graphdef, params, mesh):
        """Fill-mask: the 5 best guesses at every position of `data.eval_batch_size` texts of
        `data.max_len` tokens."""
        rows, length = self.config.data.eval_batch_size, self.config.data.max_len
        vocab = self.abstract_data_values(self.config)["vocab_size"]
        tokens = shd.abstract_input((rows, length), jnp.int32, mesh)
        allowed = jax.ShapeDtypeStruct((vocab,), jnp.bool_, sharding=shd.replicated(mesh))

        def lower():
            return fill_mask.top_k_program.lower(graphdef, params, tokens, tokens, allowed, 5)

        return {"fill-mask": (lower, rows * length, "token")}

    def score_split(
        self, model: nnx.Module, split: str, *, mesh: Mesh, options: ScoreOptions | None = None
    ) -> SplitScores | None:
        """A split's MLM and NSP figures beside always guessing the most frequent training
        token and chance; None for an empty split. (The baseline costs nothing: always on.)"""
        started = time.time()
        batches = self.eval_batches(split)
        sums = split_sums(self.loss_fn, model, batches, mesh)
        if sums is None:
            return None
        metrics = pretrain_summary(sums)
        docs = pipeline.sentence_documents(self.config.data, self.tokenizer, "train", self.workdir)
        train_ids = np.fromiter((t for d in docs for s in d for t in s), np.int32)
        metrics["mlm_baseline_accuracy"] = most_frequent_token_accuracy(train_ids, batches)
        line = (
            f"{metrics['pairs']:.0f} {split} pairs, {metrics['mlm_tokens']:.0f} masked tokens "
            f"({time.time() - started:.0f} s)\n"
            f"  masked LM: accuracy {100 * metrics['mlm_accuracy']:.1f}% (most frequent token: "
            f"{100 * metrics['mlm_baseline_accuracy']:.1f}%), perplexity "
            f"{metrics['mlm_perplexity']:.1f}\n"
            f"  next sentence: accuracy {100 * metrics['nsp_accuracy']:.1f}% (chance: 50%)"
        )
        return SplitScores(metrics, line, self.score_kind)
