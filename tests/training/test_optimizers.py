"""Optimizers and schedules by config: each schedule against its formula, AdamW's decay mask,
layer-wise learning-rate decay, the head-first phase (LP-FT), the state layout of older runs,
and the errors."""

import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest
from flax import nnx

from transformer_jax import models
from transformer_jax.models.decoder_only.config import DecoderOnlyConfig
from transformer_jax.runs.layout import Workdir
from transformer_jax.training import optimizer as opt
from transformer_jax.training.config_guard import check_or_write_config
from transformer_jax.training.schedules import (
    constant_schedule,
    cosine_schedule,
    linear_schedule,
    noam_schedule,
)

PEAK, WARMUP, TOTAL, FLOOR = 3e-4, 10, 110, 0.1


@pytest.mark.parametrize("count", [0, 4, 9, 10, 30, 60, 109, 200])
def test_schedules_follow_their_formulas(count):
    step = count + 1  # Optax counts updates from 0; the first update is step 1.
    warm = PEAK * min(1.0, step / WARMUP)
    done = min(max((step - WARMUP) / (TOTAL - WARMUP), 0.0), 1.0)
    linear = warm if step < WARMUP else PEAK * (1 - (1 - FLOOR) * done)
    cosine = (
        warm
        if step < WARMUP
        else PEAK * (FLOOR + (1 - FLOOR) * 0.5 * (1 + math.cos(math.pi * done)))
    )
    assert float(linear_schedule(PEAK, WARMUP, TOTAL, FLOOR)(count)) == pytest.approx(
        linear, rel=1e-5
    )
    assert float(cosine_schedule(PEAK, WARMUP, TOTAL, FLOOR)(count)) == pytest.approx(
        cosine, rel=1e-5
    )
    assert float(constant_schedule(PEAK, WARMUP)(count)) == pytest.approx(warm, rel=1e-6)


def tiny_params():
    cfg = DecoderOnlyConfig(vocab_size=17, num_layers=3, d_model=8, num_heads=2, d_ff=12, max_len=6)
    return nnx.state(models.build_model(cfg, rngs=nnx.Rngs(0)), nnx.Param)


def flat(tree) -> dict[str, np.ndarray]:
    return {
        "/".join(opt._names(path)): np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
    }


@pytest.mark.parametrize("embeddings", [True, False])
def test_weight_decay_shrinks_exactly_the_masked_leaves(embeddings):
    params = tiny_params()
    tx, _ = opt.make_optimizer(
        8, optimizer="adamw", schedule="constant", learning_rate=0.1, warmup_steps=0,
        weight_decay=0.5, weight_decay_embeddings=embeddings,
    )  # fmt: skip
    zero = jax.tree.map(jnp.zeros_like, params)
    updates, _ = tx.update(zero, tx.init(params), params)
    moved = {k: np.abs(v).max() > 0 for k, v in flat(updates).items()}
    for name, value in flat(params).items():
        if "embed" in name:
            expected = embeddings
        else:  # Biases (FFN b1 and b2 are vectors, attention ones [N, H]) and LayerNorms: never.
            expected = not (name.endswith("bias") or value.ndim <= 1)
        assert moved[name] == expected, name
        if expected:  # A zero gradient: the update is -lr * decay * parameter.
            np.testing.assert_allclose(flat(updates)[name], -0.1 * 0.5 * value, rtol=1e-6)
    assert moved["decoder/layers/0/self_attn/query"] and not moved["decoder/layers/0/ffn/b1"]


@pytest.mark.parametrize("scan", [False, True])
def test_layer_decay_factors_per_block(scan):
    cfg = DecoderOnlyConfig(vocab_size=17, num_layers=3, d_model=8, num_heads=2, d_ff=12,
                            max_len=6, scan_layers=scan)  # fmt: skip
    params = nnx.state(models.build_model(cfg, rngs=nnx.Rngs(0)), nnx.Param)
    tx, _ = opt.make_optimizer(
        8, schedule="constant", learning_rate=1.0, warmup_steps=0, layer_decay=0.5
    )
    ones = jax.tree.map(jnp.ones_like, params)
    updates, _ = tx.update(ones, tx.init(params), params)  # Adam's first step: -lr per entry.
    got = flat(updates)
    assert np.allclose(got["embed/embedding"], -(0.5**4))  # Embeddings: decay^(L + 1).
    assert np.allclose(got["decoder/final_norm/scale"], -1.0)  # Above the blocks: 1.
    for i in range(3):  # Block i of L = 3: decay^(L - i).
        block = got["decoder/layers/ffn/w1"][i] if scan else got[f"decoder/layers/{i}/ffn/w1"]
        assert np.allclose(block, -(0.5 ** (3 - i))), i


def test_head_only_steps_hold_the_rest_then_ramp_it_in():
    """Steps 0-2 move the head alone; then the rest joins at 1/2, then fully (ramp 2)."""
    params = {"body": {"w": jnp.ones(3)}, "head": {"kernel": jnp.ones(2)}}
    tx, _ = opt.make_optimizer(
        8, schedule="constant", learning_rate=1.0, warmup_steps=2, head_only_steps=3,
        head=("head",), optimizer="adamw", head_lr_factor=10.0,
    )  # fmt: skip
    state, grads = tx.init(params), jax.tree.map(jnp.ones_like, params)
    body, head = [], []
    for _ in range(6):
        updates, state = tx.update(grads, state, params)
        body.append(float(updates["body"]["w"][0]))
        head.append(float(updates["head"]["kernel"][0]))
    lr = constant_schedule(1.0, 2)
    expected = [-float(lr(t)) for t in range(6)]  # Adam on constant gradients: -lr per entry.
    np.testing.assert_allclose(head, [10 * e for e in expected], rtol=1e-5)
    factors = [0, 0, 0, 0.5, 1, 1]
    np.testing.assert_allclose(
        body, [f * e for f, e in zip(factors, expected, strict=True)], rtol=1e-5
    )


def test_head_l2_adds_the_penalty_gradient_to_the_head_weights_only():
    """d/dW (l2 / 2 ||W||^2) = l2 W on the head's matrices; its bias and the body get nothing."""
    params = {
        "body": {"kernel": jnp.full((2, 3), 2.0)},
        "head": {"kernel": jnp.arange(6.0).reshape(2, 3), "bias": jnp.ones(3)},
    }
    grads = jax.tree.map(jnp.ones_like, params)
    penalty = opt.head_l2_penalty(("head",), 0.25)
    got, _ = penalty.update(grads, penalty.init(params), params)
    np.testing.assert_allclose(got["head"]["kernel"], 1 + 0.25 * params["head"]["kernel"])
    np.testing.assert_allclose(got["head"]["bias"], 1.0)
    np.testing.assert_allclose(got["body"]["kernel"], 1.0)

    # In the optimizer it acts as part of the loss: with zero gradients only the head moves,
    # down its own weights.
    tx, _ = opt.make_optimizer(
        8, schedule="constant", learning_rate=0.1, head=("head",), head_l2=0.25, optimizer="adam"
    )
    zero = jax.tree.map(jnp.zeros_like, params)
    updates, _ = tx.update(zero, tx.init(params), params)
    assert np.all(np.asarray(updates["head"]["kernel"]).ravel()[1:] < 0)
    np.testing.assert_allclose(updates["body"]["kernel"], 0.0)
    assert opt.layout({"head_l2": 0.25})["head_l2"] == "on"


def test_head_only_steps_need_a_head_and_a_pretrained_start():
    with pytest.raises(ValueError, match="need a task with a new head"):
        opt.make_optimizer(8, schedule="constant", head_only_steps=2)
    with pytest.raises(ValueError, match="but config.init_from is not set"):
        opt.check_fields(ml_collections.ConfigDict({"head_only_steps": 5}))
    with pytest.raises(ValueError, match="head_lr_factor must be a number > 0"):
        opt.check_fields(ml_collections.ConfigDict({"head_lr_factor": 0, "init_from": "r"}))
    with pytest.raises(ValueError, match="head_only_steps must be an integer >= 0"):
        opt.check_fields(ml_collections.ConfigDict({"head_only_steps": -1, "init_from": "r"}))
    with pytest.raises(ValueError, match="head_l2 must be a number >= 0"):
        opt.check_fields(ml_collections.ConfigDict({"head_l2": -0.1, "init_from": "r"}))
    with pytest.raises(ValueError, match="head_l2=0.1 concern"):
        opt.check_fields(ml_collections.ConfigDict({"head_l2": 0.1}))
    with pytest.raises(ValueError, match="need a task with a new head"):
        opt.make_optimizer(8, schedule="constant", head_l2=0.1)


def test_adam_on_noam_keeps_the_state_layout_of_older_runs():
    params = {"w": jnp.ones(3)}
    tx, _ = opt.make_optimizer(8)
    older = optax.chain(optax.adam(noam_schedule(8, 4000), b1=0.9, b2=0.98, eps=1e-9))
    assert jax.tree.structure(tx.init(params)) == jax.tree.structure(older.init(params))


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"optimizer": "sgd"}, "config.optimizer='sgd' is not one of \\['adam', 'adamw'\\]"),
        ({"schedule": "step"}, "'noam', 'linear', 'cosine', 'constant'"),
        ({"weight_decay": 0.01}, "config.weight_decay=0.01 but config.optimizer='adam'"),
        ({"layer_decay": 0.0}, "config.layer_decay must be in"),
    ],
)
def test_bad_fields_are_named(fields, message):
    with pytest.raises(ValueError, match=message):
        opt.check_fields(ml_collections.ConfigDict(fields))


def test_layer_decay_on_a_model_without_blocks_is_named():
    tx, _ = opt.make_optimizer(8, schedule="constant", layer_decay=0.5)
    params = {"head": jnp.ones(3)}
    with pytest.raises(ValueError, match="config.layer_decay"):
        tx.update(params, tx.init(params), params)


def test_a_resumed_run_refuses_another_optimizer_layout(tmp_path):
    workdir = Workdir.at(tmp_path)
    model = models.config_section("decoder_only", "tiny")
    config = ml_collections.ConfigDict({"task": "t", "model": model, "optimizer": "adam"})
    check_or_write_config(workdir, config)
    check_or_write_config(workdir, config)  # The same: resumes.
    config.optimizer = "adamw"
    with pytest.raises(ValueError, match="optimizer: adam -> adamw"):
        check_or_write_config(workdir, config)
