"""Input pipelines (no model imports): the shared SentencePiece tokenizer, and translation pairs
(`data.translation`: sources, caches, fixed-shape batches), re-exported here.

cfg = default_data_config()
tokenizer = load_tokenizer_or_train(cfg, workdir)
train_iter = make_train_iterator(cfg, tokenizer, workdir)
batch = next(train_iter)  # {"src", "tgt_in", "tgt_out", "weights"} (+ segments if packed)
"""

from transformer_jax.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    train_tokenizer,
)
from transformer_jax.data.translation.batching import (
    BATCH_KEYS,
    PACKED_KEYS,
    build_batch,
    padded_batch,
)
from transformer_jax.data.translation.config import (
    bucket_lengths,
    default_data_config,
    validate_data_config,
)
from transformer_jax.data.translation.embedded import embedded_pairs, number_pairs, sample_integers
from transformer_jax.data.translation.iterator import TrainIterator
from transformer_jax.data.translation.pipeline import (
    EvalBatches,
    load_tokenizer_or_train,
    make_eval_batches,
    make_train_iterator,
    tokenized_split,
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
    "BOS_ID",
    "EOS_ID",
    "PACKED_KEYS",
    "PAD_ID",
    "UNK_ID",
    "EvalBatches",
    "TokenizedPairs",
    "Tokenizer",
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
    "train_tokenizer",
    "validate_data_config",
]
