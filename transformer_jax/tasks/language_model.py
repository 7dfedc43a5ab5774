"""Causal language modelling: next-token loss over packed documents, perplexity, bits per byte.

Batches (from `transformer_jax.data.lm`): `inputs`, `targets`, `weights`, `segment_ids`,
`positions`, `bytes`, all `[B, T]`; see data/lm/rows.py. Bits per byte is the total negative
log-likelihood in bits over the UTF-8 bytes of the text (each document counting one byte for
its end): unlike perplexity it does not depend on the tokenizer, so models with different
vocabularies, and compressors, compare on it.

With `config.init_from` the model continues a pretrained one (trained here, or a converted
GPT-2) on this run's text: its model section must be the pretrained model's, and the
tokenizer and the vocabulary are the pretrained run's (`tasks.pretrained`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx
from jax.sharding import Mesh

from transformer_jax import sharding as shd
from transformer_jax import storage
from transformer_jax.data.lm import config as lm_config
from transformer_jax.data.lm import pipeline
from transformer_jax.data.lm import rows as lm_rows
from transformer_jax.data.lm.config import SPLITS
from transformer_jax.data.lm.sources import read_documents
from transformer_jax.data.lm.stdlib_corpus import load_stdlib_corpus
from transformer_jax.inference.generator import Generator, generate_program
from transformer_jax.runs.layout import Workdir
from transformer_jax.tasks import losses, pretrained, text_baselines
from transformer_jax.tasks.base import (
    ScoreOptions,
    SplitScores,
    check_positions,
    check_split,
)
from transformer_jax.tasks.corpus_task import CorpusTask
from transformer_jax.tasks.shared_fields import (
    LABEL_SMOOTHING,
    Range,
    check_number,
    check_shared_fields,
)
from transformer_jax.tasks.split_scores import split_sums

SAMPLING_NUMBERS = {  # How the samples at each evaluation are drawn.
    "sample_temperature": Range(0.0, True, math.inf, False, "0 = greedy"),
    "sample_top_p": Range(0.0, False, 1.0, True, "1 = off"),
}
SAMPLE_PROMPT_CHARS = 40  # Samples continue the first characters of held-out documents.


def lm_loss(
    model: nnx.Module,
    batch: dict[str, jax.Array],
    rng: jax.Array | None,
    deterministic: bool,
    *,
    label_smoothing: float = 0.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(summed loss, metric sums incl. NLL in nats and the bytes covered) of a packed batch."""
    logits = model(
        batch["inputs"],
        segment_ids=batch["segment_ids"],
        positions=batch["positions"],
        rng=rng,
        deterministic=deterministic,
    )
    sums = losses.token_metrics(logits, batch["targets"], batch["weights"], label_smoothing)
    sums["bytes"] = batch["bytes"].sum()
    return sums["loss_sum"], sums


def lm_summary(sums: Mapping[str, Any]) -> dict[str, float]:
    """Loss, perplexity, token accuracy and bits per byte (and per token) from summed metrics."""
    out = losses.summarize(sums)
    out["bits_per_token"] = out["nll"] / math.log(2)
    if float(sums["bytes"]) > 0:
        out["bits_per_byte"] = losses.bits_per_byte(float(sums["nll_sum"]), float(sums["bytes"]))
    return out


def sample_prompts(documents: Sequence[str], count: int) -> list[str]:
    """The first words (about SAMPLE_PROMPT_CHARS characters) of the first `count` documents."""
    prompts = []
    for doc in documents[:count]:
        cut = doc.rfind(" ", 0, SAMPLE_PROMPT_CHARS)
        prompts.append(doc[: cut if cut > 0 else SAMPLE_PROMPT_CHARS])
    return prompts


def comparison_table(metrics: Mapping[str, float]) -> str:
    """The model's bits per byte beside the baselines', best first."""
    rows = [("this model", metrics["bits_per_byte"])]
    rows += [
        (name, metrics[f"{key}_bits_per_byte"])
        for name, key in (("lzma -9e", "lzma"), ("zlib -9", "zlib"), ("char bigram", "bigram"))
        if f"{key}_bits_per_byte" in metrics
    ]
    return "\n".join(
        f"  {name:<12} {bpb:6.3f} bits/byte" for name, bpb in sorted(rows, key=lambda r: r[1])
    )


class LanguageModelTask(CorpusTask):
    """Next-token prediction with the decoder-only model (GPT)."""

    name = "language_model"
    normalizer = "tokens"
    best_metric = "bits_per_byte"
    best_mode = "min"
    score_kind = "lm"
    init_from_hints = {  # vocab_size is the only model field the data decides.
        "vocab_size": "leave config.model.vocab_size unset: the pretrained model's ({value}) "
        "is taken",
    }

    @classmethod
    def add_config_fields(cls, config: ml_collections.ConfigDict) -> None:
        config.label_smoothing = 0.0  # Plain likelihood: perplexity and bits per byte measure it.
        config.samples = 3  # Held-out prompts continued at the final test (1 at each evaluation).
        config.sample_tokens = 48  # Tokens generated per sample.
        config.sample_temperature = 0.8  # Sampling temperature of the samples (0 = greedy).
        config.sample_top_p = 0.95  # Nucleus of the samples.
        config.baselines = True  # Test bits per byte of lzma, zlib and a char bigram beside.
        pretrained.add_init_from(config)  # A language model to continue; '': from scratch.

    @classmethod
    def validate(cls, config: ml_collections.ConfigDict) -> None:
        check_shared_fields(config, cls.name, "decoder_only")
        check_number(config, "label_smoothing", LABEL_SMOOTHING)
        lm_config.validate_lm_data_config(config.data)
        if config.model.positional == "learned":
            check_positions(config)
        for name, allowed in SAMPLING_NUMBERS.items():
            check_number(config, name, allowed)
        for name in ("samples", "sample_tokens"):
            value = config[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"config.{name} must be an integer >= 0, got {value!r}.")
        if not isinstance(config.baselines, bool):
            raise ValueError(f"config.baselines must be True or False, got {config.baselines!r}.")
        pretrained.check_init_from(config, other_tokenizers="'sentencepiece' or 'byte'")

    def __init__(self, config: ml_collections.ConfigDict, workdir: Workdir):
        super().__init__(config, workdir)
        self.init_from = config.get("init_from") or None
        if self.init_from:
            self.tokenizer = pretrained.pretrained_tokenizer(
                config.data, workdir, self.init_from, self.name
            )
        else:
            self.tokenizer = pipeline.load_lm_tokenizer(config.data, workdir)
        self._documents: dict[str, list[str]] = {}

    def write_corpus_manifest(self) -> dict:
        """Writes workdir/corpus.json: per split documents and UTF-8 bytes, and for the stdlib
        corpus the Python version and content hash it was gathered from."""
        manifest = {"source": self.config.data.source}
        if self.config.data.source == "stdlib":
            manifest |= load_stdlib_corpus(self.workdir.cache).manifest()
        else:
            for split in SPLITS:
                texts = self.documents(split)
                manifest[split] = {
                    "documents": len(texts),
                    "bytes": sum(len(t.encode("utf-8")) for t in texts),
                }
        storage.write_text_atomic(self.workdir.corpus_json, json.dumps(manifest, indent=1))
        return manifest

    def documents(self, split: str) -> list[str]:
        """The texts of a split, read once per run."""
        if split not in self._documents:
            try:
                self._documents[split] = read_documents(self.config.data, split, self.workdir.cache)
            except ValueError:
                if split != "test" or self.config.data.source != "text":
                    raise
                self._documents[split] = []
        return self._documents[split]

    def data_values(self) -> Mapping[str, Any]:
        """vocab_size: the tokenizer's; with init_from the pretrained model's (a converted
        model's table may have rows its tokenizer never produces)."""
        if self.init_from:
            vocab = pretrained.pretrained_field(
                self.init_from, "vocab_size", self.name, self.workdir
            )
            return {"vocab_size": vocab}
        return {"vocab_size": self.tokenizer.vocab_size}

    @classmethod
    def batch_spec(cls, config, split="train", *, process_count=1):
        """Every key [B, data.max_len] (see data/lm/rows.py), `weights` and `bytes` float32, the
        rest int32; B = `rows_per_batch` (tokens_per_batch / max_len, down to batch_multiple)
        for "train", data.eval_batch_size for "eval". One shape per split."""
        check_split(split)
        data = config.data
        rows = cls.batch_rows(data, split)
        return {
            k: jax.ShapeDtypeStruct(
                (rows, data.max_len), jnp.float32 if k in lm_rows.FLOAT_KEYS else jnp.int32
            )
            for k in lm_rows.BATCH_KEYS
        }

    def train_iterator(self):
        if jax.process_index() == 0:
            self.write_corpus_manifest()
        return pipeline.make_lm_train_iterator(self.config.data, self.tokenizer, self.workdir)

    def eval_batches(self, split: str = "eval"):
        return pipeline.make_lm_eval_batches(self.config.data, self.tokenizer, split, self.workdir)

    def loss_fn(self, model, batch, rng, deterministic):
        return lm_loss(
            model, batch, rng, deterministic, label_smoothing=self.config.label_smoothing
        )

    def summarize(self, sums):
        return lm_summary(sums)

    def inference_programs(self, graphdef, params, mesh):
        """Sampling (temperature, top-k, top-p) of 32 prompts of half the context, continued
        to its end with the KV cache."""
        rows, context = 32, self.config.data.max_len
        width = max(context // 2, 1)
        max_new = context - width + 1

        def spec(shape, dtype):
            return shd.abstract_input(shape, dtype, mesh)

        key = jax.ShapeDtypeStruct((), jax.random.key(0).dtype, sharding=shd.replicated(mesh))
        scalars = [jax.ShapeDtypeStruct((), d, sharding=shd.replicated(mesh))
                   for d in (jnp.float32, jnp.int32, jnp.float32)]  # fmt: skip
        args = (graphdef, params, spec((rows, width), jnp.int32), spec((rows,), jnp.int32),
                spec((rows,), jnp.bool_), key, *scalars)  # fmt: skip

        def lower():
            return generate_program.lower(
                *args, cache_len=width - 1 + max_new, max_new=max_new, greedy=False
            )

        return {"sampling": (lower, rows * max_new, "token")}

    def samples(
        self, model: nnx.Module, split: str, count: int, mesh: Mesh
    ) -> list[tuple[str, str]]:
        """(prompt, continuation) for the first `count` documents of a split (seeded)."""
        prompts = sample_prompts(self.documents(split), count)
        if not prompts or self.config.sample_tokens == 0:
            return []
        generator = Generator(model, self.tokenizer, mesh=mesh)
        texts = generator.generate(
            prompts,
            min(self.config.sample_tokens, model.cfg.max_len // 2),  # room for the prompt
            temperature=self.config.sample_temperature,
            top_p=self.config.sample_top_p,
            seed=self.config.seed,
        )
        return list(zip(prompts, texts, strict=True))

    def evaluate(self, model: nnx.Module, split: str, *, mesh: Mesh):
        """ "eval": one sample to watch (the loop has the validation loss already). "test":
        `score_split`."""
        if split == "eval":
            samples = self.samples(model, "eval", min(1, self.config.samples), mesh)
            return {}, "\n".join(f"  sample: {p!r} -> {c!r}" for p, c in samples) or None
        return super().evaluate(model, split, mesh=mesh)

    def score_split(
        self, model: nnx.Module, split: str, *, mesh: Mesh, options: ScoreOptions | None = None
    ) -> SplitScores | None:
        """A split's loss, perplexity and bits per byte beside lzma, zlib and a character
        bigram on the same text (`options.baselines`, default config.baselines), and a few
        samples; None for an empty split."""
        options = options or ScoreOptions()
        started = time.time()
        sums = split_sums(self.loss_fn, model, self.eval_batches(split), mesh)
        if sums is None:
            return None
        metrics = lm_summary(sums)
        if self.config.baselines if options.baselines is None else options.baselines:
            metrics |= text_baselines.baselines(self.documents("train"), self.documents(split))
        lines = [
            f"{len(self.documents(split))} {split} documents, {metrics['tokens']:.0f} tokens, "
            f"perplexity {metrics['perplexity']:.2f}, accuracy {100 * metrics['accuracy']:.1f}%, "
            f"bits per byte {metrics['bits_per_byte']:.3f} ({time.time() - started:.0f} s)",
            comparison_table(metrics),
        ]
        for prompt, text in self.samples(model, split, self.config.samples, mesh):
            lines.append(f"  sample: {prompt!r} -> {text!r}")
        return SplitScores(metrics, "\n".join(lines), self.score_kind)
