"""BERT pretraining's loss: the masked-LM loss counts only the selected positions, NSP only the
real pairs, and the summary's means are what the step divides by."""

import jax
import numpy as np
import pytest
from flax import nnx

from transformer_jax.models.encoder_only import EncoderOnly, EncoderOnlyConfig
from transformer_jax.tasks.bert_pretrain import pretrain_loss, pretrain_summary
from transformer_jax.tokens import CLS_ID, SEP_ID

V = 53


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    inputs = rng.integers(7, V, (3, 11)).astype(np.int32)
    inputs[:, 0], inputs[:, 5], inputs[:, 10] = CLS_ID, SEP_ID, SEP_ID
    inputs[2, 8:] = 0  # a shorter row
    batch = {
        "inputs": inputs,
        "segment_ids": np.repeat([[0] * 6 + [1] * 5], 3, 0).astype(np.int32),
        "mlm_positions": np.array([[1, 3, 0], [2, 7, 9], [4, 0, 0]], np.int32),
        "mlm_targets": rng.integers(7, V, (3, 3)).astype(np.int32),
        "mlm_weights": np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0]], np.float32),
        "nsp_labels": np.array([0, 1, 1], np.int32),
        "nsp_weights": np.array([1, 1, 0], np.float32),
    }
    return {k: jax.numpy.asarray(v) for k, v in batch.items()}


def test_losses_are_over_selected_positions_and_real_pairs_only():
    model = EncoderOnly(EncoderOnlyConfig.tiny(vocab_size=V), rngs=nnx.Rngs(0))
    batch = _batch()
    loss, sums = pretrain_loss(model, batch, None, True)
    real = jax.numpy.asarray(np.arange(11) < np.array([[11], [11], [8]]))  # row 2 is padded
    hidden = model(batch["inputs"], batch["segment_ids"], attention_mask=real)
    logp = jax.nn.log_softmax(model.mlm_logits(hidden), -1)  # every position
    nll = [
        -logp[b, p, batch["mlm_targets"][b, j]]
        for b in range(3)
        for j, p in enumerate(batch["mlm_positions"][b])
        if batch["mlm_weights"][b, j]
    ]
    nsp = -jax.nn.log_softmax(model.nsp_logits(model.pool(hidden)), -1)
    assert float(sums["mlm_tokens"]) == 6 and float(sums["pairs"]) == 2
    assert float(sums["mlm_loss_sum"]) == pytest.approx(float(sum(nll)), rel=1e-5)
    assert float(sums["nsp_loss_sum"]) == pytest.approx(float(nsp[0, 0] + nsp[1, 1]), rel=1e-5)
    summary = pretrain_summary(jax.device_get(sums))
    # The step divides by mlm_tokens: mean MLM loss + mean NSP loss.
    assert float(loss) / 6 == pytest.approx(summary["mlm_loss"] + summary["nsp_loss"], rel=1e-5)
    # Unused slots, padding pairs and unselected tokens' targets change nothing.
    targets = np.array(batch["mlm_targets"])
    targets[0, 2] = targets[2, 1] = 8
    other = {**batch, "mlm_targets": jax.numpy.asarray(targets)}
    other["nsp_labels"] = jax.numpy.asarray([0, 1, 0], np.int32)
    assert float(pretrain_loss(model, other, None, True)[0]) == pytest.approx(float(loss))
