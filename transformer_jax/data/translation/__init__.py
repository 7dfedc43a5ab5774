"""Sentence pairs for translation: sources (embedded, TFDS, text files), tokenization caches,
length buckets or packed rows, and the resumable training iterator. Other tasks' data (language
model text, images) lives beside this package and shares `transformer_jax.data.tokenizer`."""
