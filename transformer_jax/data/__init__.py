"""Input pipelines, one subpackage per kind of data over a few shared modules (no model imports).

Each task imports its own subpackage:

  translation  sentence pairs (embedded, TFDS, text files), token caches, buckets or packed rows
  lm           language-model documents packed into rows; the embedded stdlib corpus
  bert         BERT pretraining: sentences, next-sentence pairs, masking; the input layout
  classify     labelled texts and text pairs for fine-tuning the encoder
  images       labelled images for the Vision Transformer: sources, augmentation, batches

and they share:

  tokenizer       the SentencePiece tokenizer and the special ids (re-exported here)
  byte_tokenizer  one token per UTF-8 byte: nothing to train, every text round-trips
  files           reading the user's text files: UTF-8 only, errors naming file, line, column
  epochs          the infinite, checkpointable iterator over epochs of batches (grain)
  tfds_io         opening and reading TFDS datasets without TensorFlow
  config_checks   the checks and the one error format of the data configs
  hosts           which host this is, and the workdir, as every pipeline takes them
  labelled_batches  batches of labelled examples held as arrays (text and image classification)

Importing this package loads the tokenizer only: inference needs nothing more, and the
pipelines pull in grain, a slow import.
"""

from transformer_jax.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    UNK_ID,
    Tokenizer,
    train_tokenizer,
)
from transformer_jax.deprecation import moved_names

# Translation's names, which this package re-exported when translation was its only task; they
# go in the next release. Resolved on use only, so that importing the package stays light.
__getattr__ = moved_names(__name__, "transformer_jax.data.translation")

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "UNK_ID", "Tokenizer", "train_tokenizer"]
