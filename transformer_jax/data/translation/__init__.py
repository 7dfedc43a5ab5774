"""Sentence pairs for translation: sources (embedded, TFDS, text files), tokenization caches,
length buckets or packed rows, and the resumable training iterator.

    cfg = default_data_config()
    tokenizer = load_tokenizer_or_train(cfg, workdir)
    train_iter = make_train_iterator(cfg, tokenizer, workdir)
    batch = next(train_iter)  # {"src", "tgt_in", "tgt_out", "weights"} (+ segments if packed)

What the translation task, the tests and the benchmarks call is re-exported here from the
modules below; importing the package loads the pipeline, and with it grain (inference never
does: it needs only `transformer_jax.data.tokenizer`, which every task's data shares).

  config      the data config (one ConfigDict, a comment per field) and its validation
  sources     (source, target) pairs per split and shard, from the three sources below
  embedded    the embedded English -> French / German number corpus, made on the spot
  tfds_source TFDS translation datasets read without TensorFlow
  text_files  aligned text files, or one tab-separated file
  tokenized   a tokenized corpus as flat arrays, its .npy cache and the length filter
  planning    which pairs go into which batch, epoch by epoch (length buckets or packing)
  batching    the batch dicts the model consumes
  iterator    the infinite, checkpointable training iterator
  pipeline    the tokenizer, training iterator and evaluation batches, from a config
"""

from transformer_jax.data.translation.batching import (
    BATCH_KEYS,
    PACKED_KEYS,
    SpecialIds,
    build_batch,
    padded_batch,
)
from transformer_jax.data.translation.config import (
    bucket_lengths,
    default_data_config,
    validate_data_config,
)
from transformer_jax.data.translation.embedded import (
    embedded_pairs,
    number_pairs,
    sample_integers,
)
from transformer_jax.data.translation.iterator import TrainIterator
from transformer_jax.data.translation.pipeline import (
    EvalBatches,
    load_tokenizer_or_train,
    make_eval_batches,
    make_train_iterator,
    tokenized_split,
    train_shapes,
)
from transformer_jax.data.translation.sources import get_pairs, read_shard, shard_range
from transformer_jax.data.translation.text_files import read_aligned, read_tsv
from transformer_jax.data.translation.tokenized import (
    TokenizedPairs,
    filter_by_length,
    tokenize_pairs,
)

__all__ = [
    "BATCH_KEYS",
    "PACKED_KEYS",
    "EvalBatches",
    "SpecialIds",
    "TokenizedPairs",
    "TrainIterator",
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
    "train_shapes",
    "validate_data_config",
]
