"""Input pipelines (no model imports): the shared SentencePiece tokenizer, and translation pairs
(`data.translation`: sources, caches, fixed-shape batches), re-exported here.

    cfg = default_data_config()
    tokenizer = load_tokenizer_or_train(cfg, workdir)
    train_iter = make_train_iterator(cfg, tokenizer, workdir)
    batch = next(train_iter)  # {"src", "tgt_in", "tgt_out", "weights"} (+ segments if packed)

The translation names load on first use (PEP 562): inference needs only the tokenizer, and the
pipeline pulls in grain, a slow import.
"""

import importlib

from transformer_jax.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    train_tokenizer,
)

_TRANSLATION = {
    "batching": ("BATCH_KEYS", "PACKED_KEYS", "build_batch", "padded_batch"),
    "config": ("bucket_lengths", "default_data_config", "validate_data_config"),
    "embedded": ("embedded_pairs", "number_pairs", "sample_integers"),
    "iterator": ("TrainIterator",),
    "pipeline": (
        "EvalBatches",
        "load_tokenizer_or_train",
        "make_eval_batches",
        "make_train_iterator",
        "tokenized_split",
    ),
    "sources": ("get_pairs", "read_shard", "shard_range"),
    "text_files": ("read_aligned", "read_tsv"),
    "tokenized": ("TokenizedPairs", "filter_by_length", "tokenize_pairs"),
}
_HOME = {name: module for module, names in _TRANSLATION.items() for name in names}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'transformer_jax.data' has no attribute {name!r}")
    module = importlib.import_module(f"transformer_jax.data.translation.{_HOME[name]}")
    return getattr(module, name)


__all__ = [
    "BATCH_KEYS",
    "BOS_ID",
    "EOS_ID",
    "EvalBatches",
    "PACKED_KEYS",
    "PAD_ID",
    "TokenizedPairs",
    "Tokenizer",
    "TrainIterator",
    "UNK_ID",
    "bucket_lengths",
    "build_batch",
    "default_data_config",
    "embedded_pairs",
    "filter_by_length",
    "get_pairs",
    "load_tokenizer_or_train",
    "make_eval_batches",
    "make_train_iterator",
    "number_pairs",
    "padded_batch",
    "read_aligned",
    "read_shard",
    "read_tsv",
    "sample_integers",
    "shard_range",
    "tokenize_pairs",
    "tokenized_split",
    "train_tokenizer",
    "validate_data_config",
]
