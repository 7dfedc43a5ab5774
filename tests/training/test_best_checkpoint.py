"""best/: saved after an evaluation only when the validation metric strictly improves (either
direction), never for NaN or twice for a step; its parameters are what the final test reads.
With test_checkpoint="average", the final test scores the mean of the last checkpoints."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from configs import tiny
from tests.train_runs import train_once
from transformer_jax.cli import evaluate
from transformer_jax.inference import loading
from transformer_jax.training.checkpointing import Checkpoints
from transformer_jax.training.loop import validate_train_config
from transformer_jax.workdir import Workdir


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
    params = loading.restore_params(Workdir.at(tmp_path), 2, abstract, sharding, best=True)
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


def test_the_final_test_can_score_the_mean_of_the_last_checkpoints(tmp_path):
    """A 6-step ViT run saved every 2 steps: its test record is what `evaluate --average_last=2`
    gives for the same workdir (the mean of steps 4 and 6), not the last step's figure."""
    run = train_once(
        tmp_path, "configs/vit_tiny.py", "--config.num_train_steps=6", "--config.eval_every=2",
        "--config.checkpoint_every=2", "--config.keep_checkpoints=3",
        "--config.test_checkpoint=average", "--config.test_average_last=2",
    )  # fmt: skip
    assert (
        "test of the mean of the last 2 checkpoints (steps 4, 6)"
        in (run / "train.stderr").read_text()
    )
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    (test,) = [r for r in rows if r["split"] == "test"]
    assert evaluate.main([f"--workdir={run}", "--split=test", "--average_last=2"]) == 0
    averaged = json.loads((run / "eval" / "test.step6.avg2.image.json").read_text())
    assert test["loss"] == pytest.approx(averaged["loss"], rel=1e-5)
    assert evaluate.main([f"--workdir={run}", "--split=test"]) == 0
    last = json.loads((run / "eval" / "test.step6.image.json").read_text())
    assert test["loss"] != pytest.approx(last["loss"], rel=1e-5)
