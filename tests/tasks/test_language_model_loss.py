"""The language model's loss and summary: bits per byte, bits per token, perplexity and NLL of a
uniform model on a hand-computed packed batch whose tokens are not bytes."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.data.lm import rows
from transformer_jax.tasks.language_model import lm_loss, lm_summary


class _CharTokenizer:
    """One token per character (ids 4..): a tokenizer whose tokens are not bytes."""

    bos_id, eos_id = 2, 1

    def encode_batch(self, texts):
        return [[4 + (ord(c) % 50) for c in t] for t in texts]


class _Uniform(nnx.Module):
    """A 'model' that gives every token of a V-word vocabulary the same probability."""

    def __init__(self, vocab):
        self.vocab = vocab

    def __call__(self, tokens, **kwargs):
        return jnp.zeros(tokens.shape + (self.vocab,))


def test_bits_per_byte_on_a_hand_computed_case():
    # "é" is one token and two bytes, "ab" two tokens and two bytes; each document adds one
    # prediction (EOS) and one byte (its end). Predictions 2 + 3 = 5, bytes 3 + 3 = 6, and a
    # uniform model over V = 64 pays log2(64) = 6 bits per prediction: 5 * 6 / 6 = 5.0.
    docs = rows.tokenize_documents(_CharTokenizer(), ["é", "ab"])
    chunks = rows.chunk_documents(docs, 8)
    batch = rows.PackedEpoch(docs, chunks, np.arange(len(chunks)), 8, 1)[0]
    _, sums = lm_loss(_Uniform(64), {k: jnp.asarray(v) for k, v in batch.items()}, None, True)
    metrics = lm_summary(sums)
    assert float(sums["bytes"]) == 6 and float(sums["tokens"]) == 5
    assert metrics["bits_per_byte"] == pytest.approx(5.0, rel=1e-6)
    assert metrics["bits_per_token"] == pytest.approx(6.0, rel=1e-6)
    assert metrics["perplexity"] == pytest.approx(64.0, rel=1e-5)
    assert math.isclose(metrics["nll"], math.log(64), rel_tol=1e-6)
