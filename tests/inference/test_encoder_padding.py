"""The encoder front ends tell the model where their padding is: a text's fill-mask guesses and
class probabilities do not depend on how far its batch is padded, and the training losses do
not depend on padding columns."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from transformer_jax.inference import classifier, fill_mask
from transformer_jax.inference.encoder_inputs import batch_inputs
from transformer_jax.models.encoder_only import EncoderOnly, EncoderOnlyConfig
from transformer_jax.tasks.bert_pretrain import pretrain_loss
from transformer_jax.tasks.classify import classify_loss
from transformer_jax.tokens import MASK_ID

V, K = 37, 3


@pytest.fixture(scope="module")
def split_model():
    cfg = EncoderOnlyConfig.tiny(vocab_size=V, num_labels=K)
    return nnx.split(EncoderOnly(cfg, rngs=nnx.Rngs(0)))


def _batches():
    """One input alone (padded to 16) and beside a long one (padded to 32): (a, b) pairs."""
    text = [11, MASK_ID, 12, 13, 14]
    long = list(range(7, 7 + 25))
    return [(text, None)], [(text, None), (long, [8, 9])], len(text) + 2


def test_fill_mask_guesses_do_not_depend_on_the_padding(split_model):
    graphdef, params = split_model
    alone, beside, n = _batches()
    allowed = jnp.ones((V,), bool)
    out = []
    for encoded in (alone, beside):
        tokens, segments = batch_inputs(encoded, 64, rows=2)
        probs, _ = fill_mask.top_k_program(graphdef, params, tokens, segments, allowed, 4)
        out.append(np.asarray(probs)[0, :n])
    assert (
        batch_inputs(beside, 64, rows=2)[0].shape[1] > batch_inputs(alone, 64, rows=2)[0].shape[1]
    )
    np.testing.assert_allclose(out[0], out[1], atol=1e-6)


def test_class_probabilities_do_not_depend_on_the_padding(split_model):
    graphdef, params = split_model
    alone, beside, _ = _batches()
    probs = [
        np.asarray(classifier.probabilities_program(graphdef, params, *batch_inputs(e, 64, rows=2)))
        for e in (alone, beside)
    ]
    np.testing.assert_allclose(probs[0][0], probs[1][0], atol=1e-6)


def test_losses_do_not_depend_on_padding_columns(split_model):
    model = nnx.merge(*split_model)
    rng = np.random.default_rng(0)
    tokens = rng.integers(7, V, (4, 9)).astype(np.int32)
    tokens[:, 0], tokens[1, 5:], tokens[3, 7:] = 4, 0, 0  # [CLS] first; rows 1, 3 padded
    widened = np.pad(tokens, ((0, 0), (0, 6)))  # six more PAD_ID columns
    batch = {
        "labels": np.array([0, 1, 2, 1], np.int32),
        "weights": np.ones(4, np.float32),
        "mlm_positions": np.array([[1, 2], [3, 4], [2, 0], [6, 1]], np.int32),
        "mlm_targets": rng.integers(7, V, (4, 2)).astype(np.int32),
        "mlm_weights": np.ones((4, 2), np.float32),
        "nsp_labels": np.array([0, 1, 1, 0], np.int32),
        "nsp_weights": np.ones(4, np.float32),
    }
    for loss_fn in (classify_loss, pretrain_loss):
        sums = []
        for t in (tokens, widened):
            full = {**batch, "inputs": t, "segment_ids": np.zeros_like(t)}
            sums.append(loss_fn(model, {k: jnp.asarray(v) for k, v in full.items()}, None, True)[1])
        for key in sums[0]:
            np.testing.assert_allclose(sums[0][key], sums[1][key], rtol=1e-5, atol=1e-5)
