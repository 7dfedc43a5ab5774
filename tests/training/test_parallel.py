"""Sharded training steps equal the single-device step (8 simulated CPU devices).

Tolerance: losses agree to 1e-5 relative; every updated parameter to 2e-5 absolute (Adam
updates are of order the learning rate, 3e-3 here; reductions in another order differ in the
last float32 bits).
"""

import functools

import chex
import jax
import numpy as np
import pytest

from transformer_jax import sharding as shd
from transformer_jax.models.encoder_decoder import EncoderDecoderConfig
from transformer_jax.tasks.translation import translation_loss
from transformer_jax.training import step as ts
from transformer_jax.training.optimizer import make_optimizer
from transformer_jax.training.state import create_train_state

LOSS = functools.partial(translation_loss, label_smoothing=0.1)
# One layer a side: each sharding rule a layer applies is exercised once per stack, and each
# further layer would add compile time (most of these tests' cost) without a new rule.
ONE_LAYER_EACH = dict(num_encoder_layers=1, num_decoder_layers=1)
CFG = EncoderDecoderConfig.tiny(
    vocab_size=48, d_model=32, num_heads=4, d_ff=64, dropout_rate=0.1, **ONE_LAYER_EACH
)


def _batch(seed, rows=16, src_len=9, tgt_len=7):
    rng = np.random.default_rng(seed)
    src = rng.integers(4, CFG.vocab_size, (rows, src_len)).astype(np.int32)
    tgt = rng.integers(4, CFG.vocab_size, (rows, tgt_len)).astype(np.int32)
    src[::3, 6:] = 0
    tgt[::2, 5:] = 0
    tgt_in = np.concatenate([np.full((rows, 1), 2, np.int32), tgt[:, :-1]], 1)
    return {"src": src, "tgt_in": tgt_in, "tgt_out": tgt, "weights": (tgt != 0).astype(np.float32)}


def _run(mesh_shape, devices=None, steps=2, grad_accum_steps=1, cfg=CFG):
    tx, _ = make_optimizer(cfg.d_model, warmup_steps=10, lr_factor=1.0)
    mesh = shd.make_mesh(mesh_shape, devices=devices)
    graphdef, state, shardings = create_train_state(cfg, tx, mesh, seed=0)
    train_fn, _ = ts.compile_steps(
        graphdef, tx, shardings, mesh, loss_fn=LOSS, grad_accum_steps=grad_accum_steps
    )
    losses = []
    for i in range(steps):
        state, m = train_fn(state, ts.global_batch(_batch(i), mesh), jax.random.key(7))
        losses.append(float(m["loss_sum"] / m["tokens"]))
    return losses, jax.device_get(state.params), state


@pytest.fixture(scope="module")
def single():
    return _run({"data": 1}, devices=jax.devices()[:1])


@pytest.mark.parametrize(
    "mesh_shape",
    [{"data": 8}, {"data": 2, "fsdp": 4}, {"data": 2, "tensor": 4}, {"fsdp": 2, "tensor": 4}],
    ids=["data8", "data2-fsdp4", "data2-tensor4", "fsdp2-tensor4"],
)
def test_sharded_step_equals_single_device(single, mesh_shape):
    assert jax.device_count() == 8
    ref_losses, ref_params, _ = single
    losses, params, state = _run(mesh_shape)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    chex.assert_trees_all_close(params, ref_params, atol=2e-5)  # same tree, close leaves
    w1 = state.params["encoder"]["layers"][0]["ffn"]["w1"][...]
    if mesh_shape.get("fsdp", 1) > 1:
        assert "fsdp" in str(w1.sharding.spec)  # parameters really are split
    if mesh_shape.get("tensor", 1) > 1:
        assert "tensor" in str(w1.sharding.spec)


@pytest.mark.slow(seconds=40)
def test_gradient_accumulation_equals_full_batch():
    """Without dropout (micro-batches draw their own dropout masks) the updates are the same."""
    cfg = CFG.replace(dropout_rate=0.0)
    one = jax.devices()[:1]
    ref_losses, ref_params, _ = _run({"data": 1}, devices=one, cfg=cfg)
    losses, params, _ = _run({"data": 1}, devices=one, grad_accum_steps=2, cfg=cfg)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    chex.assert_trees_all_close(params, ref_params, atol=2e-5)  # same tree, close leaves


def test_params_are_born_sharded():
    tx, _ = make_optimizer(CFG.d_model, warmup_steps=10)
    mesh = shd.make_mesh({"fsdp": 8})
    _, state, _ = create_train_state(CFG, tx, mesh, seed=0)
    emb = state.params["src_embed"]["embedding"][...]
    assert emb.sharding.spec == jax.sharding.PartitionSpec(None, "fsdp")
    shard_shapes = {s.data.shape for s in emb.addressable_shards}
    assert shard_shapes == {(CFG.vocab_size, CFG.d_model // 8)}
    moments = [x for x in jax.tree.leaves(state.opt_state) if x.shape == emb.shape]
    assert len(moments) == 2  # Adam's mu and nu, sharded like their parameter
    assert all(m.sharding.spec == emb.sharding.spec for m in moments)


def test_mesh_errors_are_clear():
    with pytest.raises(ValueError, match="needs 6 devices but 8"):
        shd.make_mesh({"data": 2, "fsdp": 3})
    with pytest.raises(ValueError, match="at most one mesh axis may be -1"):
        shd.make_mesh({"data": -1, "fsdp": -1})
    with pytest.raises(ValueError, match="expert"):
        shd.make_mesh({"expert": 2})


def test_logical_rules_skip_indivisible_dims():
    mesh = shd.make_mesh({"data": 2, "tensor": 4})
    spec = shd.logical_to_spec(("vocab", "embed"), (50, 32), mesh)
    assert spec == jax.sharding.PartitionSpec(None, None)  # 50 % 4 != 0: replicated
    spec = shd.logical_to_spec(("embed", "heads", "kv"), (32, 4, 8), mesh)
    assert spec == jax.sharding.PartitionSpec(None, "tensor", None)


def test_train_step_compiles_once():
    tx, _ = make_optimizer(CFG.d_model, warmup_steps=10)
    mesh = shd.make_mesh({"data": 8})
    graphdef, state, shardings = create_train_state(CFG, tx, mesh, seed=0)
    train_fn, _ = ts.compile_steps(graphdef, tx, shardings, mesh, loss_fn=LOSS)
    for i in range(3):
        state, _ = train_fn(state, ts.global_batch(_batch(i), mesh), jax.random.key(0))
    assert train_fn.jitted._cache_size() == 1
