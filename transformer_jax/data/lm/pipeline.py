"""What the language-model task calls: tokenizer, training iterator, evaluation batches.

    tokenizer = load_lm_tokenizer(cfg, workdir)
    train_iter = make_lm_train_iterator(cfg, tokenizer, workdir)   # host-local, infinite
    eval_batches = make_lm_eval_batches(cfg, tokenizer, "eval", workdir)

Every host reads the whole split and computes the same plan, then keeps its own rows of each
batch (the corpora this is meant for fit in memory; the stdlib corpus is a few MB).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import ml_collections
import numpy as np

from transformer_jax.data.byte_tokenizer import ByteTokenizer
from transformer_jax.data.epochs import EpochIterator
from transformer_jax.data.hosts import as_workdir, resolve_processes
from transformer_jax.data.lm import config as config_lib
from transformer_jax.data.lm import rows as rows_lib
from transformer_jax.data.lm.sources import read_documents, source_fingerprint
from transformer_jax.data.pretrained_tokenizer import PretrainedTokenizer
from transformer_jax.data.tokenizer import Tokenizer, load_or_train, train_tokenizer
from transformer_jax.runs.tokenizer import kept_copy

# The project's tokenizers, and a converted GPT-2's (which `config.init_from` brings).
AnyTokenizer = Tokenizer | ByteTokenizer | PretrainedTokenizer
_TOKENIZER_SEED = 0  # Which training documents the tokenizer sees.
_SPM_PIECE_CHARS = 1 << 15  # Documents are cut to pieces of this size to train SentencePiece.


def load_lm_tokenizer(
    cfg: ml_collections.ConfigDict,
    workdir,
    special_symbols: tuple[str, ...] = (),
    extra_documents: Sequence[str] = (),
    extra_settings: Mapping[str, Any] | None = None,
) -> AnyTokenizer:
    """Bytes, `spm_model_path`, the workdir's tokenizer.model, or a new SentencePiece model
    (a pretrained run's tokenizer, with `config.init_from`, is `tasks.pretrained`'s).

    A new model is trained on `spm_sample_size` training documents with byte fallback and a
    newline piece, so that every text is encoded without loss (no unk: bits per byte stay
    honest), and written to workdir/tokenizer.model with its settings in tokenizer.json.
    `special_symbols` (e.g. BERT's `[CLS] [SEP] [MASK]`) become user-defined pieces with the
    ids right after the four fixed ones, in order, and are never split. `extra_documents`
    (e.g. BERT's number documents) are added to the sampled training documents, and
    `extra_settings`, which must describe them, to the settings a saved model is checked by.
    """
    if bool(extra_documents) != (extra_settings is not None):
        raise ValueError("extra_documents and extra_settings come together: pass both or neither.")
    if cfg.tokenizer == "byte":
        return ByteTokenizer()
    if cfg.tokenizer == "pretrained":  # The language-model task reads it from init_from.
        raise ValueError(
            "data config field 'tokenizer': 'pretrained' is a converted checkpoint's tokenizer, "
            "which only comes with config.init_from. Set init_from, or use 'sentencepiece' or "
            "'byte'."
        )
    workdir = as_workdir(workdir)
    if cfg.spm_model_path is not None:
        return kept_copy(cfg.spm_model_path, workdir.tokenizer_model)
    settings = {
        **source_fingerprint(cfg),
        **{k: cfg[k] for k in ("vocab_size", "spm_model_type", "spm_character_coverage")},
        "spm_sample_size": cfg.spm_sample_size,
    }
    if special_symbols:
        settings["special_symbols"] = list(special_symbols)
    if extra_settings is not None:
        settings["extra_documents"] = dict(extra_settings)

    def train() -> Tokenizer:
        documents = read_documents(cfg, "train", workdir.cache)
        rng = np.random.default_rng(_TOKENIZER_SEED)
        if len(documents) > cfg.spm_sample_size:
            keep = np.sort(rng.choice(len(documents), cfg.spm_sample_size, replace=False))
            documents = [documents[i] for i in keep]
        documents = [*documents, *extra_documents]
        pieces = [
            d[i : i + _SPM_PIECE_CHARS]
            for d in documents
            for i in range(0, len(d), _SPM_PIECE_CHARS)
        ]
        tokenizer = train_tokenizer(
            pieces,
            vocab_size=cfg.vocab_size,
            model_type=cfg.spm_model_type,
            character_coverage=cfg.spm_character_coverage,
            byte_fallback=True,
            user_defined_symbols=[*special_symbols, "\n"],
            max_sentence_length=4 * _SPM_PIECE_CHARS,  # bytes: up to 4 per character
        )
        logging.info(
            "Trained a tokenizer of %d pieces on %d documents", tokenizer.vocab_size, len(documents)
        )
        return tokenizer

    return load_or_train(workdir.tokenizer_model, workdir.tokenizer_settings, settings, train)


def tokenized_split(
    cfg: ml_collections.ConfigDict, tokenizer: AnyTokenizer, split: str, workdir=None
) -> rows_lib.TokenizedDocuments:
    """The documents of a split, each as BOS, tokens, EOS."""
    cache = None if workdir is None else as_workdir(workdir).cache
    return rows_lib.tokenize_documents(tokenizer, read_documents(cfg, split, cache))


def _fingerprint(docs: rows_lib.TokenizedDocuments, *settings) -> str:
    digest = hashlib.sha256(json.dumps(settings).encode())
    for array in (docs.offsets, docs.ids[: 1 << 20]):  # lengths decide the plan; ids the text
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


class LMTrainIterator(EpochIterator):
    """Infinite host-local batches of packed rows, reshuffled each epoch, resumable.

    Attributes:
      num_documents, num_chunks, num_predictions: the training split's sizes.
      rows_per_batch: global rows per batch (this host yields rows_per_batch / hosts).
    """

    def __init__(
        self,
        docs: rows_lib.TokenizedDocuments,
        *,
        max_len: int,
        rows_per_batch: int,
        seed: int,
        process_index: int = 0,
        process_count: int = 1,
        num_workers: int = 0,
    ):
        if len(docs) == 0:
            raise ValueError("The training split has no documents.")
        self._docs, self._chunks = docs, rows_lib.chunk_documents(docs, max_len)
        self._args = (max_len, rows_per_batch, process_index, process_count)
        self._seed = seed
        self.num_documents, self.num_chunks = len(docs), len(self._chunks)
        self.num_predictions, self.rows_per_batch = docs.num_predictions, rows_per_batch
        layout = f"{process_index}/{process_count}"
        fingerprint = _fingerprint(docs, max_len, rows_per_batch, seed, layout)
        super().__init__(self.epoch_batches, fingerprint, num_workers=num_workers)

    def epoch_batches(self, epoch: int) -> rows_lib.PackedEpoch:
        """The batches of `epoch` as a random-access sequence (no threads, no state)."""
        order = np.random.default_rng([self._seed, epoch]).permutation(len(self._chunks))
        max_len, rows, index, count = self._args
        return rows_lib.PackedEpoch(self._docs, self._chunks, order, max_len, rows, index, count)


def make_lm_train_iterator(
    cfg: ml_collections.ConfigDict,
    tokenizer: AnyTokenizer,
    workdir,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> LMTrainIterator:
    """The infinite training iterator over this host's rows of each global batch."""
    process_index, process_count = resolve_processes(process_index, process_count)
    docs = tokenized_split(cfg, tokenizer, "train", workdir)
    rows = config_lib.rows_per_batch(cfg)
    iterator = LMTrainIterator(
        docs,
        max_len=cfg.max_len,
        rows_per_batch=rows,
        seed=cfg.shuffle_seed,
        process_index=process_index,
        process_count=process_count,
        num_workers=cfg.num_workers,
    )
    logging.info(
        "Training data: %d documents, %d chunks, %d tokens; %d rows of %d per batch",
        iterator.num_documents,
        iterator.num_chunks,
        iterator.num_predictions,
        rows,
        cfg.max_len,
    )
    return iterator


def make_lm_eval_batches(
    cfg: ml_collections.ConfigDict,
    tokenizer: AnyTokenizer,
    split: str,
    workdir=None,
    *,
    process_index: int | None = None,
    process_count: int | None = None,
) -> list[dict[str, np.ndarray]]:
    """Every document of a split, packed in order into batches of `eval_batch_size` rows.

    The whole split is covered exactly once, so the summed metrics are the split's own
    (perplexity and bits per byte of the whole text). Empty when the split has no documents.
    """
    process_index, process_count = resolve_processes(process_index, process_count)
    if cfg.eval_batch_size % process_count:
        raise ValueError(
            f"data config field 'eval_batch_size': {cfg.eval_batch_size} rows do not split "
            f"over {process_count} processes. Use a multiple of {process_count}."
        )
    docs = tokenized_split(cfg, tokenizer, split, workdir)
    if len(docs) == 0:
        return []
    chunks = rows_lib.chunk_documents(docs, cfg.max_len)
    epoch = rows_lib.PackedEpoch(
        docs,
        chunks,
        np.arange(len(chunks)),
        cfg.max_len,
        cfg.eval_batch_size,
        process_index,
        process_count,
    )
    return list(epoch)
