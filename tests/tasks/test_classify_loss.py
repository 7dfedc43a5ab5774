"""The classification loss's sums: the confusion matrix of the real rows (padding rows left out),
from which accuracy and macro F1 match the numpy metrics."""

import jax
import numpy as np
import pytest
from flax import nnx

from transformer_jax.models.encoder_only import EncoderOnly, EncoderOnlyConfig
from transformer_jax.tasks import classify_metrics
from transformer_jax.tasks.classify import classify_loss
from transformer_jax.tasks.label_sums import label_summary


def test_loss_sums_and_macro_f1_match_the_numpy_metrics():
    model = EncoderOnly(EncoderOnlyConfig.tiny(vocab_size=31, num_labels=3), rngs=nnx.Rngs(0))
    rng = np.random.default_rng(0)
    tokens = rng.integers(7, 31, (9, 6)).astype(np.int32)
    tokens[:, 0] = 4
    batch = {
        "inputs": tokens,
        "segment_ids": np.zeros_like(tokens),
        "labels": rng.integers(0, 3, 9).astype(np.int32),
        "weights": np.array([1] * 7 + [0, 0], np.float32),  # two padding rows
    }
    batch = {k: jax.numpy.asarray(v) for k, v in batch.items()}
    _, sums = classify_loss(model, batch, None, True)
    logits = model.classify(model.pool(model(batch["inputs"], batch["segment_ids"])))
    predicted = np.asarray(logits.argmax(-1))[:7]
    labels = np.asarray(batch["labels"])[:7]
    np.testing.assert_array_equal(
        sums["confusion"], classify_metrics.confusion_matrix(labels, predicted, 3)
    )
    summary = label_summary(jax.device_get(sums))
    assert summary["examples"] == 7
    assert summary["accuracy"] == pytest.approx(classify_metrics.accuracy(labels, predicted))
    assert summary["macro_f1"] == pytest.approx(classify_metrics.macro_f1(labels, predicted, 3))
