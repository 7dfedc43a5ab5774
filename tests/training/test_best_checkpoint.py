"""best/: saved after an evaluation only when the validation metric strictly improves (either
direction), never for NaN or twice for a step; its parameters are what the final test reads.
With test_checkpoint="average", the final test scores the mean of the last checkpoints."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs import tiny
from transformer_jax.runs import reading
from transformer_jax.runs.checkpoints import Checkpoints
from transformer_jax.runs.layout import Workdir
from transformer_jax.training.loop import _test_params, validate_train_config


def _state(step):
    return {"params": {"w": jnp.full((4, 4), float(step))}, "opt": jnp.arange(3.0) + step}


def _evaluated(tmp_path, values, mode):
    """Checkpoints whose step-i evaluation (i from 1) gave values[i-1]; returns (ckpt, saved)."""
    ckpt = Checkpoints(Workdir.at(tmp_path), keep=2, best_metric="accuracy", best_mode=mode)
    saved = [
        step
        for step, value in enumerate(values, start=1)
        if ckpt.save_best(step, _state(step), {"epoch": 0}, {"seed": 0}, value)
    ]
    ckpt.wait()
    return ckpt, saved


@pytest.mark.parametrize(
    "mode, values, saved, best",
    [
        ("max", [0.5, 0.7, 0.6, 0.7, float("nan"), 0.65], [1, 2], (2, 0.7)),
        ("min", [2.0, 1.5, 1.5, 1.7, 1.2], [1, 2, 5], (5, 1.2)),
        ("max", [float("nan"), 0.3], [2], (2, 0.3)),
    ],
)
def test_best_follows_strict_improvements_only(tmp_path, mode, values, saved, best):
    ckpt, written = _evaluated(tmp_path, values, mode)
    try:
        assert written == saved
        assert ckpt.best_saved() == pytest.approx(best)
        assert ckpt.best.all_steps() == [best[0]]  # one best kept; the worse ones removed
    finally:
        ckpt.close()


def test_a_resumed_run_keeps_the_saved_best_and_never_saves_a_step_twice(tmp_path):
    ckpt, _ = _evaluated(tmp_path, [0.5, 0.8], "max")
    ckpt.close()
    again = Checkpoints(Workdir.at(tmp_path), best_metric="accuracy", best_mode="max")
    try:
        assert again.best_saved() == pytest.approx((2, 0.8))
        assert not again.save_best(2, _state(2), {}, {}, 0.8)  # step 2 evaluated again
        assert not again.save_best(3, _state(3), {}, {}, 0.79)
        assert again.save_best(4, _state(4), {}, {}, 0.81)
        again.wait()
        assert again.best_saved() == pytest.approx((4, 0.81))
    finally:
        again.close()


def test_the_best_parameters_restore_without_the_optimizer_state(tmp_path):
    ckpt, _ = _evaluated(tmp_path, [0.1, 0.9, 0.2], "max")
    ckpt.close()
    params = nnx.State(_state(0)["params"])
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    params = reading.restore_params(Workdir.at(tmp_path), 2, abstract, sharding, best=True)
    np.testing.assert_array_equal(params["w"], np.full((4, 4), 2.0))


def test_an_unknown_test_checkpoint_is_named():
    config = tiny.get_config()
    config.test_checkpoint = "latest"
    with pytest.raises(ValueError, match="config.test_checkpoint='latest': use one of 'best'"):
        validate_train_config(config)


@pytest.mark.parametrize("count, keep", [(1, 3), (4, 3), (0, 3)])
def test_average_needs_two_to_keep_checkpoints(count, keep):
    config = tiny.get_config()
    config.test_checkpoint, config.keep_checkpoints = "average", keep
    config.test_average_last = count
    with pytest.raises(ValueError, match=rf"test_average_last={count!r}: .* from 2 to config.keep"):
        validate_train_config(config)


def test_average_needs_that_many_saves():
    config = tiny.get_config()
    config.test_checkpoint, config.keep_checkpoints, config.test_average_last = "average", 9, 3
    config.num_train_steps, config.checkpoint_every = 25, 10  # saves at 10, 20 and 25
    validate_train_config(config)
    config.num_train_steps = 20  # saves at 10 and 20
    with pytest.raises(ValueError, match="saves only 2 checkpoints .*checkpoint_every=10"):
        validate_train_config(config)


def test_the_final_test_can_score_the_mean_of_the_last_checkpoints(tmp_path):
    """test_checkpoint="average": the element-wise mean of the last test_average_last saves
    (here steps 2 and 3 of 1, 2, 3), reported at the last step."""
    ckpt = Checkpoints(Workdir.at(tmp_path), keep=3, best_metric="accuracy", best_mode="max")
    for step in (1, 2, 3):
        ckpt.save(step, _state(step), {"epoch": 0}, {"seed": 0})
    ckpt.wait()
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    abstract = types.SimpleNamespace(
        params=nnx.State({"w": jax.ShapeDtypeStruct((4, 4), jnp.float32, sharding=sharding)})
    )
    state = types.SimpleNamespace(step=3, params=nnx.State(_state(3)["params"]))
    config = tiny.get_config()
    config.test_checkpoint, config.test_average_last = "average", 2
    try:
        params, step, which = _test_params(config, ckpt, state, abstract, task=None)
    finally:
        ckpt.close()
    np.testing.assert_array_equal(params["w"], np.full((4, 4), 2.5))
    assert (step, which) == (3, "the mean of the last 2 checkpoints (steps 2, 3)")
