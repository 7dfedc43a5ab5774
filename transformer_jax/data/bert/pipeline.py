"""What the BERT pretraining task calls: tokenizer, training iterator, evaluation batches.

    tokenizer = load_bert_tokenizer(cfg, workdir)
    train_iter = make_bert_train_iterator(cfg, tokenizer, workdir)   # host-local, infinite
    eval_batches = make_bert_eval_batches(cfg, tokenizer, "eval", workdir)

Documents (the language-model sources) are cut into sentences and tokenized once. Each epoch
draws new pairs and new masks from (shuffle_seed, epoch), so a restarted run sees the same
batches; validation and test pairs and masks are drawn once from `eval_seed`. A batch holds

    inputs, segment_ids        int32 [B, T]   `[CLS] A [SEP] B [SEP]` with masked tokens, 0 / 1
    mlm_positions, mlm_targets int32 [B, P]   the selected positions and their original tokens
    mlm_weights                float32 [B, P] 1 for a selected position, 0 for an unused slot
    nsp_labels                 int32 [B]      0 IsNext, 1 NotNext
    nsp_weights                float32 [B]    1 for a real pair, 0 for a padding row
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Sequence

import ml_collections
import numpy as np

from transformer_jax.data.bert import config as config_lib
from transformer_jax.data.bert.inputs import encode_plain
from transformer_jax.data.bert.masking import gather_selected, mask_tokens
from transformer_jax.data.bert.neighbours import nearest_documents
from transformer_jax.data.bert.numbers_mix import number_documents
from transformer_jax.data.bert.pairs import Pair, encode_pair, make_pairs
from transformer_jax.data.bert.sentences import split_sentences
from transformer_jax.data.epochs import EpochIterator, shard_rows
from transformer_jax.data.hosts import as_workdir, resolve_processes
from transformer_jax.data.lm import config as lm_config
from transformer_jax.data.lm.pipeline import load_lm_tokenizer
from transformer_jax.data.lm.sources import read_documents
from transformer_jax.data.tokenizer import Tokenizer
from transformer_jax.tokens import BERT_SYMBOLS, CLS_ID, MASK_ID, SEP_ID

Documents = list[list[list[int]]]  # document -> sentence -> token ids
_SPLIT_CODES = {"train": 0, "eval": 1, "test": 2}


def check_bert_tokenizer(tokenizer: Tokenizer, origin: str) -> None:
    """Raises unless `[CLS] [SEP] [MASK]` are whole pieces with the fixed ids 4, 5, 6."""
    for symbol, wanted in zip(BERT_SYMBOLS, (CLS_ID, SEP_ID, MASK_ID), strict=True):
        if tokenizer.vocab_size <= wanted or tokenizer.id_to_piece(wanted) != symbol:
            raise ValueError(
                f"{origin}: id {wanted} must be the piece {symbol!r} for BERT. Train the "
                f"tokenizer with user_defined_symbols={list(BERT_SYMBOLS)} (leave "
                f"data.spm_model_path unset and train.py does)."
            )


def load_bert_tokenizer(cfg: ml_collections.ConfigDict, workdir) -> Tokenizer:
    """`spm_model_path`, the workdir's tokenizer.model, or a new SentencePiece model with
    BERT's symbols (see `load_lm_tokenizer`), trained on the number documents too with
    `data.mix_numbers_in_tokenizer`."""
    extra = {}
    if cfg.get("mix_numbers_in_tokenizer", False):
        settings = _mix_settings(cfg)
        documents = number_documents(**settings, cache_dir=as_workdir(workdir).cache)
        extra = {
            "extra_documents": ["\n".join(d) for d in documents],
            "extra_settings": {"mix_numbers": settings},
        }
    tokenizer = load_lm_tokenizer(cfg, workdir, special_symbols=BERT_SYMBOLS, **extra)
    check_bert_tokenizer(tokenizer, cfg.spm_model_path or str(as_workdir(workdir).tokenizer_model))
    return tokenizer


def _mix_settings(cfg: ml_collections.ConfigDict) -> dict:
    """`number_documents`' arguments from the `data.mix_numbers` fields."""
    return {
        "count": cfg.mix_numbers,
        "seed": cfg.mix_numbers_seed,
        "lang": cfg.mix_numbers_lang,
        "per_document": cfg.mix_numbers_per_document,
    }


def sentence_documents(
    cfg: ml_collections.ConfigDict, tokenizer: Tokenizer, split: str, workdir=None
) -> Documents:
    """The documents of a split as tokenized sentences (documents without any dropped); the
    training split ends with `data.mix_numbers`' number documents."""
    cache = None if workdir is None else as_workdir(workdir).cache
    sentences = [split_sentences(d) for d in read_documents(cfg, split, cache)]
    if split == "train" and cfg.get("mix_numbers", 0):
        sentences += number_documents(**_mix_settings(cfg), cache_dir=cache)
    flat = encode_plain(tokenizer, [s for doc in sentences for s in doc])
    documents, start = [], 0
    for doc in sentences:
        ids = [s for s in flat[start : start + len(doc)] if s]
        start += len(doc)
        if ids:
            documents.append(ids)
    return documents


def negative_groups(cfg: ml_collections.ConfigDict, documents: Documents) -> dict:
    """`make_pairs`' `groups` and `aligned` for `data.mix_numbers_negatives="numbers"` (the
    number documents, last of the training split, draw their NotNext B from one another), plus
    `partners` for "similar" (each from its `mix_numbers_neighbours` nearest), else no
    arguments (BERT's: any other document)."""
    if not cfg.get("mix_numbers", 0) or cfg.get("mix_numbers_negatives", "any") == "any":
        return {}
    numbers = math.ceil(cfg.mix_numbers / cfg.mix_numbers_per_document)
    first = len(documents) - numbers
    out = {"groups": [0] * first + [1] * numbers, "aligned": (1,)}
    if cfg.mix_numbers_negatives == "similar":
        members = range(first, len(documents))
        out["partners"] = nearest_documents(documents, members, cfg.mix_numbers_neighbours)
    return out


def masking(cfg: ml_collections.ConfigDict) -> dict:
    """`PretrainBatches`' settings that the data config decides: row length, masked positions
    per row and the masking rate."""
    return {"max_len": cfg.max_len, "max_predictions": config_lib.max_predictions(cfg),
            "mask_rate": cfg.mask_rate}  # fmt: skip


class PretrainBatches(Sequence):
    """One epoch's batches of pairs, masked on access (random access, no state).

    The masks of batch i come from (seed, epoch, i) and are drawn over the global batch, so
    every host agrees and keeps its own rows.
    """

    def __init__(
        self,
        pairs: Sequence[Pair],
        order: np.ndarray,
        *,
        rows: int,
        max_len: int,
        max_predictions: int,
        vocab_size: int,
        mask_rate: float,
        seed: int,
        epoch: int,
        pad_last: bool,
        process_index: int = 0,
        process_count: int = 1,
        word_starts: np.ndarray | None = None,
    ):
        self._pairs, self._order, self._rows, self._max_len = pairs, order, rows, max_len
        self._word_starts = word_starts
        self._max_predictions, self._vocab_size, self._mask_rate = (
            max_predictions,
            vocab_size,
            mask_rate,
        )
        self._seed, self._epoch, self._hosts = seed, epoch, (process_index, process_count)
        self._len = -(-len(order) // rows) if pad_last else len(order) // rows

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        if not 0 <= i < self._len:
            raise IndexError(i)
        chosen = [self._pairs[j] for j in self._order[i * self._rows : (i + 1) * self._rows]]
        tokens = np.zeros((self._rows, self._max_len), np.int32)
        segments = np.zeros_like(tokens)
        labels = np.zeros(self._rows, np.int32)
        real = np.zeros(self._rows, np.float32)
        for r, pair in enumerate(chosen):
            tokens[r], segments[r] = encode_pair(pair, self._max_len)
            labels[r], real[r] = 0 if pair.is_next else 1, 1.0
        rng = np.random.default_rng([self._seed, self._epoch, 1, i])
        inputs, targets, weights = mask_tokens(
            tokens,
            rng,
            vocab_size=self._vocab_size,
            rate=self._mask_rate,
            word_starts=self._word_starts,
        )
        positions, mlm_targets, mlm_weights = gather_selected(
            targets, weights, self._max_predictions
        )
        batch = {
            "inputs": inputs,
            "segment_ids": segments,
            "mlm_positions": positions,
            "mlm_targets": mlm_targets,
            "mlm_weights": mlm_weights,
            "nsp_labels": labels,
            "nsp_weights": real,
        }
        return shard_rows(batch, *self._hosts)


def _fingerprint(documents: Documents, *settings) -> str:
    digest = hashlib.sha256(json.dumps(settings).encode())
    for doc in documents:
        digest.update(np.asarray([len(s) for s in doc], np.int32).tobytes())
        digest.update(np.asarray(doc[0], np.int32).tobytes())
    return digest.hexdigest()[:16]


class BertTrainIterator(EpochIterator):
    """Infinite host-local pretraining batches: new pairs, order and masks every epoch."""

    def __init__(
        self,
        documents: Documents,
        cfg: ml_collections.ConfigDict,
        vocab_size: int,
        *,
        process_index: int = 0,
        process_count: int = 1,
        word_starts: np.ndarray | None = None,
    ):
        if not documents:
            raise ValueError("The training split has no sentences.")
        if cfg.get("whole_word_mask", False) and word_starts is None:
            raise ValueError(
                "data.whole_word_mask needs the tokenizer's word starts: build the iterator "
                "with make_bert_train_iterator (or pass word_starts=word_starts(tokenizer))."
            )
        self._documents, self._cfg, self._vocab_size = documents, cfg, vocab_size
        self._word_starts = word_starts if cfg.get("whole_word_mask", False) else None
        self._hosts = (process_index, process_count)
        self.rows_per_batch = lm_config.rows_per_batch(cfg)
        self._negatives = negative_groups(cfg, documents)
        fingerprint = _fingerprint(
            documents,
            cfg.max_len,
            self.rows_per_batch,
            cfg.shuffle_seed,
            cfg.mask_rate,
            cfg.short_seq_prob,
            vocab_size,
            f"{process_index}/{process_count}",
            *([cfg.mix_numbers_negatives] if self._negatives else []),
            *([cfg.mix_numbers_neighbours] if "partners" in self._negatives else []),
            *(["whole words"] if self._word_starts is not None else []),
        )
        super().__init__(self.epoch_batches, fingerprint, num_workers=cfg.num_workers)

    def epoch_batches(self, epoch: int) -> PretrainBatches:
        """The batches of `epoch` (pairs drawn and shuffled from (shuffle_seed, epoch))."""
        cfg = self._cfg
        rng = np.random.default_rng([cfg.shuffle_seed, epoch, 0])
        pairs = make_pairs(
            self._documents,
            rng,
            max_len=cfg.max_len,
            short_prob=cfg.short_seq_prob,
            **self._negatives,
        )
        if len(pairs) < self.rows_per_batch:
            raise ValueError(
                f"The training split makes {len(pairs)} sentence pairs, fewer than one batch "
                f"of {self.rows_per_batch} rows. Lower data.tokens_per_batch or add text."
            )
        return PretrainBatches(
            pairs,
            rng.permutation(len(pairs)),
            rows=self.rows_per_batch,
            **masking(cfg),
            vocab_size=self._vocab_size,
            seed=cfg.shuffle_seed,
            epoch=epoch,
            pad_last=False,
            process_index=self._hosts[0],
            process_count=self._hosts[1],
            word_starts=self._word_starts,
        )


def word_starts(tokenizer: Tokenizer) -> np.ndarray:
    """bool [vocab_size]: the pieces that begin a word (SentencePiece's `▁` prefix)."""
    return np.array(
        [tokenizer.id_to_piece(i).startswith("\u2581") for i in range(tokenizer.vocab_size)]
    )


def make_bert_train_iterator(
    cfg: ml_collections.ConfigDict,
    tokenizer: Tokenizer,
    workdir,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> BertTrainIterator:
    """The infinite pretraining iterator over this host's rows of each global batch."""
    process_index, process_count = resolve_processes(process_index, process_count)
    documents = sentence_documents(cfg, tokenizer, "train", workdir)
    iterator = BertTrainIterator(
        documents,
        cfg,
        tokenizer.vocab_size,
        process_index=process_index,
        process_count=process_count,
        word_starts=word_starts(tokenizer) if cfg.get("whole_word_mask", False) else None,
    )
    logging.info(
        "Pretraining data: %d documents (%d integers mixed in: data.mix_numbers), %d "
        "sentences; %d rows of %d per batch",
        len(documents),
        cfg.get("mix_numbers", 0),
        sum(len(d) for d in documents),
        iterator.rows_per_batch,
        cfg.max_len,
    )
    return iterator


def make_bert_eval_batches(
    cfg: ml_collections.ConfigDict,
    tokenizer: Tokenizer,
    split: str,
    workdir=None,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> list[dict[str, np.ndarray]]:
    """Fixed pairs and masks of a split (from `eval_seed`), every pair once, the last batch
    padded with empty rows; empty when the split has no text."""
    process_index, process_count = resolve_processes(process_index, process_count)
    if cfg.eval_batch_size % process_count:
        raise ValueError(
            f"data config field 'eval_batch_size': {cfg.eval_batch_size} rows do not split "
            f"over {process_count} processes. Use a multiple of {process_count}."
        )
    try:
        documents = sentence_documents(cfg, tokenizer, split, workdir)
    except ValueError:
        if split != "test" or cfg.source != "text":
            raise
        documents = []  # an unset text_test
    if not documents:
        return []
    rng = np.random.default_rng([cfg.eval_seed, _SPLIT_CODES[split]])
    pairs = make_pairs(documents, rng, max_len=cfg.max_len, short_prob=cfg.short_seq_prob)
    batches = PretrainBatches(
        pairs,
        np.arange(len(pairs)),
        rows=cfg.eval_batch_size,
        **masking(cfg),
        vocab_size=tokenizer.vocab_size,
        seed=cfg.eval_seed,
        epoch=_SPLIT_CODES[split],
        pad_last=True,
        process_index=process_index,
        process_count=process_count,
    )
    return list(batches)
