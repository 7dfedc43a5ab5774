"""What the classification task calls: the labelled splits, the tokenizer, batches.

    dataset = load_dataset(cfg, cache_dir)                 # LabelledSplits
    tokenizer = load_classify_tokenizer(cfg, workdir, init_from)
    encoded = encode_examples(tokenizer, dataset.splits["train"], cfg.max_len)
    train_iter = ClassifyTrainIterator(encoded, cfg)        # host-local, infinite, resumable
    eval_batches = eval_batches(encoded_eval, cfg)

A batch holds `inputs`, `segment_ids` (int32 [B, T]: `[CLS] A [SEP] (B [SEP])`), `labels`
(int32 [B]) and `weights` (float32 [B]: 0 for the padding rows of a split's last batch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Sequence

import ml_collections
import numpy as np

from transformer_jax.data import pretrained_tokenizer as converted
from transformer_jax.data.bert.inputs import encode_plain, layout, specials_of
from transformer_jax.data.bert.pipeline import check_bert_tokenizer
from transformer_jax.data.classify.examples import Example, LabelledSplits, label_subset
from transformer_jax.data.classify.numbers_pair import numbers_pair_dataset
from transformer_jax.data.classify.stdlib_packages import stdlib_packages_dataset
from transformer_jax.data.classify.tsv import tsv_dataset
from transformer_jax.data.epochs import EpochIterator
from transformer_jax.data.hosts import as_workdir, resolve_processes
from transformer_jax.data.labelled_batches import (
    LabelledBatches,
    check_enough,
    check_rows,
    every_example_once,
    shuffled_epoch,
)
from transformer_jax.data.tokenizer import Tokenizer, load_or_train, train_tokenizer
from transformer_jax.runs.layout import Workdir
from transformer_jax.runs.tokenizer import kept_copy
from transformer_jax.tokens import BERT_SYMBOLS


def load_dataset(cfg: ml_collections.ConfigDict, cache_dir=None) -> LabelledSplits:
    """The configured source's labelled splits; with `train_fraction` < 1, that share of the
    training examples (per label)."""
    if cfg.source == "numbers_pair":
        sizes = {"train": cfg.numbers_train, "eval": cfg.numbers_eval, "test": cfg.numbers_test}
        dataset = numbers_pair_dataset(sizes, cfg.numbers_seed, cfg.numbers_lang)
    elif cfg.source == "stdlib_packages":
        dataset = stdlib_packages_dataset(cache_dir, seed=cfg.stdlib_seed)
    else:
        dataset = tsv_dataset(cfg.tsv_train, cfg.tsv_eval, cfg.tsv_test)
    fraction = cfg.get("train_fraction", 1.0)
    if fraction >= 1:
        return dataset
    train = dataset.splits["train"]
    kept = label_subset(train, fraction, cfg.get("train_fraction_seed", 0))
    logging.info(
        "train: %d of %d labelled examples kept (data.train_fraction=%g).",
        len(kept), len(train), fraction,
    )  # fmt: skip
    return dataclasses.replace(dataset, splits={**dataset.splits, "train": kept})


def load_classify_tokenizer(
    cfg: ml_collections.ConfigDict,
    workdir,
    dataset: LabelledSplits,
    init_from: str | None = None,
) -> Tokenizer:
    """The pretrained workdir's tokenizer (`init_from`), `spm_model_path`, or one trained on
    the training texts with BERT's pieces (kept as workdir/tokenizer.model)."""
    workdir = as_workdir(workdir)
    if init_from and converted.in_workdir(init_from):  # A converted checkpoint's tokenizer.
        return _converted_tokenizer(cfg, workdir, init_from)
    if workdir.tokenizer_model.exists() and init_from:
        tokenizer = Tokenizer.load(workdir.tokenizer_model)  # copied at the run's start
    elif init_from:
        source = Workdir.at(init_from).tokenizer_model
        if not source.exists():
            raise ValueError(
                f"config.init_from={init_from!r}: no tokenizer.model there, so not a pretraining "
                f"workdir. Pretrain first (python train.py "
                f"--config=configs/bert_stdlib_pretrain.py --workdir={init_from}), or set "
                f"--config.init_from='' to train from scratch."
            )
        if cfg.spm_model_path is not None and str(cfg.spm_model_path) != str(source):
            raise ValueError(
                f"config.data.spm_model_path={cfg.spm_model_path!r} but config.init_from="
                f"{init_from!r} brings its own tokenizer ({source}). Unset spm_model_path: the "
                f"pretrained embeddings only fit the pretrained tokenizer."
            )
        tokenizer = Tokenizer.load(source)
    elif cfg.spm_model_path is not None:  # Refused on resume if the file has changed.
        tokenizer = kept_copy(cfg.spm_model_path, workdir.tokenizer_model)
    else:
        texts = [t for ex in dataset.splits["train"] for t in (ex.text_a, ex.text_b) if t]

        def train() -> Tokenizer:
            return train_tokenizer(
                texts,
                vocab_size=cfg.vocab_size,
                byte_fallback=True,
                user_defined_symbols=[*BERT_SYMBOLS, "\n"],
            )

        settings = {"source": cfg.source, "vocab_size": cfg.vocab_size, "texts": len(texts)}
        return load_or_train(workdir.tokenizer_model, workdir.tokenizer_settings, settings, train)
    check_bert_tokenizer(tokenizer, str(init_from or cfg.spm_model_path))
    if not workdir.tokenizer_model.exists():  # the fine-tuned workdir stands on its own
        tokenizer.save(workdir.tokenizer_model)
    return tokenizer


def _converted_tokenizer(cfg: ml_collections.ConfigDict, workdir: Workdir, init_from: str):
    """The tokenizer of a converted checkpoint (`transformer_jax.interop`), copied into the
    fine-tuning workdir's tokenizer/ so that the run stands on its own."""
    if cfg.spm_model_path is not None:
        raise ValueError(
            f"config.data.spm_model_path={cfg.spm_model_path!r} but config.init_from="
            f"{init_from!r} brings its own tokenizer. Unset spm_model_path: the pretrained "
            f"embeddings only fit the pretrained tokenizer."
        )
    tokenizer = converted.load(Workdir.at(init_from).path / converted.WORKDIR_FOLDER)
    specials_of(tokenizer)  # Refuses one without BERT's special tokens.
    if not converted.in_workdir(workdir.path):
        tokenizer.save(workdir.path / converted.WORKDIR_FOLDER)
    return tokenizer


@dataclasses.dataclass(frozen=True)
class EncodedSplit:
    """A split's examples laid out: tokens and segment ids int32 [N, T], labels int32 [N]."""

    tokens: np.ndarray
    segments: np.ndarray
    labels: np.ndarray
    truncated: int  # examples cut to fit max_len

    def __len__(self) -> int:
        return len(self.labels)

    def arrays(self) -> dict[str, np.ndarray]:
        """The per-example arrays under their batch keys."""
        return {"inputs": self.tokens, "segment_ids": self.segments, "labels": self.labels}


def encode_examples(tokenizer, examples: Sequence[Example], max_len: int) -> EncodedSplit:
    """Every example as one row `[CLS] A [SEP] (B [SEP])` of `max_len` tokens."""
    a_ids = encode_plain(tokenizer, [ex.text_a for ex in examples])
    b_texts = [ex.text_b for ex in examples if ex.text_b is not None]
    b_ids = iter(encode_plain(tokenizer, b_texts))
    specials = specials_of(tokenizer)
    tokens = np.zeros((len(examples), max_len), np.int32)
    segments, truncated = np.zeros_like(tokens), 0
    for i, (ex, a) in enumerate(zip(examples, a_ids, strict=True)):
        b = next(b_ids) if ex.text_b is not None else None
        tokens[i], segments[i], cut = layout(a, b, max_len, specials)
        truncated += cut
    labels = np.array([ex.label for ex in examples], np.int32)
    return EncodedSplit(tokens, segments, labels, truncated)


class ClassifyTrainIterator(EpochIterator):
    """Infinite host-local training batches, reshuffled each epoch from (seed, epoch)."""

    def __init__(
        self,
        split: EncodedSplit,
        cfg: ml_collections.ConfigDict,
        *,
        process_index: int | None = None,
        process_count: int | None = None,
    ):
        check_enough(len(split), cfg.batch_size, "examples")
        self._arrays, self._rows, self._seed = split.arrays(), cfg.batch_size, cfg.shuffle_seed
        self._hosts = resolve_processes(process_index, process_count)
        check_rows("batch_size", cfg.batch_size, self._hosts)
        digest = hashlib.sha256(split.tokens.tobytes() + split.labels.tobytes())
        digest.update(f"{cfg.batch_size}/{cfg.shuffle_seed}/{self._hosts}".encode())
        super().__init__(self.epoch_batches, digest.hexdigest()[:16], num_workers=cfg.num_workers)

    def epoch_batches(self, epoch: int) -> LabelledBatches:
        return shuffled_epoch(self._arrays, self._seed, epoch, self._rows, self._hosts)


def eval_batches(
    split: EncodedSplit,
    cfg: ml_collections.ConfigDict,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> list[dict[str, np.ndarray]]:
    """Every example once, in order, the last batch padded with zero-weight rows."""
    hosts = resolve_processes(process_index, process_count)
    return every_example_once(split.arrays(), cfg.eval_batch_size, hosts)


def log_split(name: str, split: EncodedSplit, max_len: int) -> None:
    """Logs a split's size and how many examples were cut to `max_len`."""
    logging.info("%s: %d examples", name, len(split))
    if split.truncated:
        logging.warning(
            "%s: %d of %d examples are longer than data.max_len=%d tokens and were truncated "
            "(the end of the longer text is cut).",
            name,
            split.truncated,
            len(split),
            max_len,
        )
