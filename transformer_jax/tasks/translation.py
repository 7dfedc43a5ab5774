"""Translation: label-smoothed token loss (§5.4) and BLEU / chrF / exact match of decodings.

Batches (from `transformer_jax.data`): `src` [B, S], `tgt_in` [B, T], `tgt_out` [B, T],
`weights` [B, T], and for packed rows `src_segment_ids`, `src_positions`, `tgt_segment_ids`,
`tgt_positions`. Decoding for the scores goes through `Translator`, the same path as the CLIs.

With `config.init_from` the model continues a pretrained translation model (a run trained
here, or a converted OPUS-MT model) on this run's pairs: its model section must be the
pretrained model's, and the tokenizer, the vocabulary and the special ids are the pretrained
run's (`tasks.pretrained`; the batches are laid out with the tokenizer's pad, bos and eos).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx
from jax.sharding import Mesh

from transformer_jax import sharding as shd
from transformer_jax.data import translation as data_lib
from transformer_jax.data.tokenizer import configured_vocab_size
from transformer_jax.data.translation.config import check_text_split_fields, with_absolute_paths
from transformer_jax.inference import decoding
from transformer_jax.inference.scoring import corpus_scores
from transformer_jax.inference.translator import Translator
from transformer_jax.runs.layout import Workdir
from transformer_jax.tasks import losses, pretrained
from transformer_jax.tasks.base import (
    ScoreOptions,
    SplitScores,
    Task,
    check_positions,
    check_split,
)
from transformer_jax.tasks.shared_fields import (
    LABEL_SMOOTHING,
    LENGTH_PENALTY,
    check_number,
    check_shared_fields,
)

PACKING_KEYS = ("src_segment_ids", "tgt_segment_ids", "src_positions", "tgt_positions")


def _check_count(config: ml_collections.ConfigDict, name: str, minimum: int) -> None:
    value = config[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"config.{name} must be an integer >= {minimum}, got {value!r}.")


def translation_loss(
    model: nnx.Module,
    batch: dict[str, jax.Array],
    rng: jax.Array | None,
    deterministic: bool,
    *,
    label_smoothing: float = 0.1,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(summed label-smoothed loss, token metric sums) of a translation batch (§5.4)."""
    logits = model(
        batch["src"],
        batch["tgt_in"],
        **{k: batch[k] for k in PACKING_KEYS if k in batch},
        rng=rng,
        deterministic=deterministic,
    )
    sums = losses.token_metrics(logits, batch["tgt_out"], batch["weights"], label_smoothing)
    return sums["loss_sum"], sums


def _check_translation_model(init_from: str, workdir: Workdir) -> None:
    """Raises unless `init_from` holds a translation model (an encoder-decoder); nothing is
    checked once this run keeps its own model.json (a resumed run stands alone)."""
    if workdir.read_model() is not None:
        return
    run = pretrained.read_pretrained(init_from, TranslationTask.name)
    task, name = run.config.get("task"), run.config.get("model", {}).get("name")
    if name != "encoder_decoder":
        raise ValueError(
            f"config.init_from={init_from!r} holds a {task!r} run of a {name!r} model; the "
            f"translation task continues an 'encoder_decoder' (a translation run trained here, "
            f"or an OPUS-MT model converted with python -m transformer_jax convert)."
        )


class TranslationTask(Task):
    """Source sentence -> target sentence with the encoder-decoder."""

    name = "translation"
    absolute_data_paths = staticmethod(with_absolute_paths)
    normalizer = "tokens"
    best_metric = "bleu"
    best_mode = "max"
    model_defining_data_fields = (
        "vocab_size",
        "spm_model_type",
        "spm_model_path",
        "source",
        "tfds_name",
        "source_lang",
        "target_lang",
        "embedded_target_lang",
    )
    init_from_hints = {  # vocab_size is the only model field the data decides.
        "vocab_size": "leave config.model.vocab_size unset: the pretrained model's ({value}) "
        "is taken",
    }

    @classmethod
    def add_config_fields(cls, config: ml_collections.ConfigDict) -> None:
        config.label_smoothing = 0.1  # epsilon_ls (§5.4).
        config.eval_bleu_sentences = 500  # Validation sentences decoded for BLEU at each eval.
        config.decode_batch_size = 64  # Rows per decoding batch.
        config.test_sentences = 0  # Test sentences decoded after the last step; -1 all, 0 none.
        config.test_beam_size = 1  # Beam size of that final test; 1 = greedy.
        config.test_alpha = 0.6  # Its length-penalty exponent (§6.1: 0.6) when beam_size > 1.
        pretrained.add_init_from(config)  # A translation model to continue; '': from scratch.

    @classmethod
    def validate(cls, config: ml_collections.ConfigDict) -> None:
        check_shared_fields(config, cls.name, "encoder_decoder")
        check_number(config, "label_smoothing", LABEL_SMOOTHING)
        data_lib.validate_data_config(config.data)
        if config.model.max_len is not None:  # None: the data's max_len.
            check_positions(config)
        if config.data.source == "text":  # Fail now, not after the tokenizer or training.
            check_text_split_fields(config.data, "eval")
            if config.test_sentences:
                check_text_split_fields(config.data, "test")
        _check_count(config, "eval_bleu_sentences", 0)
        _check_count(config, "test_sentences", -1)
        _check_count(config, "decode_batch_size", 1)
        _check_count(config, "test_beam_size", 1)
        check_number(config, "test_alpha", LENGTH_PENALTY)
        pretrained.check_init_from(config, other_tokenizers="'sentencepiece'")

    def __init__(self, config: ml_collections.ConfigDict, workdir: Workdir):
        super().__init__(config, workdir)
        self.init_from = config.get("init_from") or None
        if self.init_from:
            _check_translation_model(self.init_from, workdir)  # Before a tokenizer is kept.
            self.tokenizer = pretrained.pretrained_tokenizer(
                config.data, workdir, self.init_from, self.name
            )
        else:
            self.tokenizer = data_lib.load_tokenizer_or_train(config.data, workdir)
        self._pairs: dict[str, list[tuple[str, str]]] = {}

    def data_values(self) -> Mapping[str, Any]:
        """vocab_size: the tokenizer's; with init_from the pretrained model's (a converted
        model's table may have rows its tokenizer never produces); max_len: data's."""
        vocab = self.tokenizer.vocab_size
        if self.init_from:
            vocab = pretrained.pretrained_field(
                self.init_from, "vocab_size", self.name, self.workdir
            )
        return {"vocab_size": vocab, "max_len": self.config.data.max_len}

    @classmethod
    def abstract_data_values(cls, config: ml_collections.ConfigDict) -> dict[str, Any]:
        """vocab_size: with init_from the pretrained model's; the pieces of
        `data.spm_model_path` when set; else `data.vocab_size`, an upper bound (a tokenizer
        trained on a small corpus has fewer); max_len: data's."""
        data = config.data
        vocab = pretrained.init_from_vocab_size(config, cls.name) or {
            "vocab_size": configured_vocab_size(data.vocab_size, data.spm_model_path)
        }
        return vocab | {"max_len": data.max_len}

    @classmethod
    def batch_spec(cls, config, split="train", *, process_count=1):
        """All keys [B, L], `weights` float32, the rest int32 (see data/translation/batching.py).

        "eval": B = data.eval_batch_size, L = data.max_len, one pair per row (also when
        training packs). "train", packed: [rows, max_len] with segment ids and positions.
        Bucketed: each bucket is its own shape of about tokens_per_batch tokens (`train_shapes`
        lists them); this is the longest, [rows, max_len]: its attention, quadratic in the
        length, needs the most memory. (A shorter bucket may hold a few more tokens, fewer
        than batch_multiple x max_len: each bucket's rows are rounded down to a multiple.)
        """
        check_split(split)
        data = config.data
        if split == "train":
            lengths, rows = data_lib.train_shapes(data, process_count)
            shape = (rows[-1] * process_count, lengths[-1])
            keys = data_lib.PACKED_KEYS if data.pack else data_lib.BATCH_KEYS
        else:
            shape, keys = (data.eval_batch_size, data.max_len), data_lib.BATCH_KEYS
        return {
            k: jax.ShapeDtypeStruct(shape, jnp.float32 if k == "weights" else jnp.int32)
            for k in keys
        }

    def train_iterator(self):
        return data_lib.make_train_iterator(self.config.data, self.tokenizer, self.workdir)

    def eval_batches(self, split: str = "eval"):
        return data_lib.make_eval_batches(self.config.data, self.tokenizer, split)

    def loss_fn(self, model, batch, rng, deterministic):
        return translation_loss(
            model, batch, rng, deterministic, label_smoothing=self.config.label_smoothing
        )

    def summarize(self, sums):
        return losses.summarize(sums)

    def inference_programs(self, graphdef, params, mesh):
        """Greedy decoding and beam search (K=4, §6.1) of `decode_batch_size` sources of
        `data.max_len` tokens, each to its default output length."""
        rows, length = self.config.decode_batch_size, self.config.data.max_len
        src = shd.abstract_input((rows, length), jnp.int32, mesh)
        out_len = decoding.output_length(nnx.merge(graphdef, params), length, None)

        def greedy(params, src):
            return decoding.greedy_decode(nnx.merge(graphdef, params), src)

        def beam(params, src):
            return decoding.beam_search(nnx.merge(graphdef, params), src, beam_size=4)

        return {
            "greedy decoding": (
                lambda: jax.jit(greedy).lower(params, src),
                rows * out_len,
                "token",
            ),
            "beam-4 decoding": (lambda: jax.jit(beam).lower(params, src), rows * out_len, "token"),
        }

    def pairs(self, split: str) -> list[tuple[str, str]]:
        """The (source, target) texts of a split, read once per run."""
        if split not in self._pairs:
            self._pairs[split] = data_lib.get_pairs(
                self.config.data, split, cache_dir=self.workdir.cache
            )
        return self._pairs[split]

    def evaluate(self, model: nnx.Module, split: str, *, mesh: Mesh):
        """KV-cached translations of "eval" (`eval_bleu_sentences` of them, greedy) or "test"
        (`test_sentences`, -1 = all; `test_beam_size`), scored with sacreBLEU, chrF and exact
        match."""
        if split != "eval":
            count = self.config.test_sentences
            scores = None
            if count != 0:
                options = ScoreOptions(
                    max_examples=max(count, 0),
                    beam_size=self.config.get("test_beam_size", 1),
                    alpha=self.config.get("test_alpha", 0.6),
                )
                scores = self.score_split(model, split, mesh=mesh, options=options)
            return ({}, None) if scores is None else (scores.metrics, scores.report)
        pairs = self.pairs(split)[: self.config.eval_bleu_sentences]
        if not pairs:
            return {}, None
        translator = Translator(model, self.tokenizer, mesh=mesh)
        hyps = translator.translate(
            [s for s, _ in pairs], beam_size=1, batch_size=self.config.decode_batch_size
        )
        scores = corpus_scores(hyps, [t for _, t in pairs])
        signature = scores.pop("bleu_signature")
        return scores, f"  sacreBLEU signature: {signature}; e.g. {hyps[0]!r}"

    def score_split(
        self, model: nnx.Module, split: str, *, mesh: Mesh, options: ScoreOptions | None = None
    ) -> SplitScores | None:
        """The split's sources decoded (greedy or beam search, `options`), scored against its
        targets with sacreBLEU (cased, detokenized, with its signature), chrF and exact match;
        the hypotheses are the outputs. None for an empty split."""
        options = options or ScoreOptions()
        pairs = self.pairs(split)
        if options.max_examples:
            pairs = pairs[: options.max_examples]
        if not pairs:
            return None
        started = time.time()
        hyps = Translator(model, self.tokenizer, mesh=mesh).translate(
            [s for s, _ in pairs],
            beam_size=options.beam_size,
            alpha=options.alpha,
            batch_size=options.batch_size or self.config.decode_batch_size,
            max_len=options.max_len,
            progress=options.progress,
        )
        seconds = time.time() - started
        refs = [t for _, t in pairs]
        scores = corpus_scores(hyps, refs)
        matches = sum(h == r for h, r in zip(hyps, refs, strict=True))
        if options.beam_size == 1:
            decoding = "greedy"
        else:
            decoding = f"beam {options.beam_size}, alpha {options.alpha}"
        metrics = {
            "sentences": len(pairs),
            "beam_size": options.beam_size,
            "alpha": options.alpha,
            "decode_seconds": round(seconds, 3),
            **scores,
        }
        report = (
            f"{len(pairs)} {split} sentences ({seconds:.0f} s), {decoding}: BLEU "
            f"{scores['bleu']:.2f}, chrF {scores['chrf']:.2f}, exact match "
            f"{100 * scores['exact_match']:.1f}% ({matches}/{len(pairs)})  "
            f"[{scores['bleu_signature']}]"
        )
        kind = f"beam{options.beam_size}"
        if options.beam_size > 1 and options.alpha != ScoreOptions.alpha:
            kind += f".alpha{options.alpha:g}"  # Another length penalty: another record.
        return SplitScores(metrics, report, kind, outputs=hyps)
