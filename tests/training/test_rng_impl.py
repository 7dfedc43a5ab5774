"""`config.rng_impl`: each generator of dropout bits resumes exactly, changes the bits, refuses
an unknown name; and what the compiled program does with rbg's bits on a mesh."""

import json
import re

import jax
import jax.numpy as jnp
import ml_collections
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from configs import tiny
from tests.train_runs import train_once
from transformer_jax import rng
from transformer_jax.training import validate_train_config

FAST = [
    "--config.eval_every=6",
    "--config.eval_bleu_sentences=0",
    "--config.test_sentences=0",
    "--config.checkpoint_every=3",
]


def _losses(workdir) -> dict[int, float]:
    rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if r["split"] == "train"}


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_a_resumed_run_repeats_the_uninterrupted_one(tmp_path, impl, tiny_workdir):
    """6 steps at once, and 3 steps then a restart to 6: the same losses bit for bit; and not
    those of threefry's bits (`tiny_workdir`: the same config and data, trained with threefry),
    so the field reaches the dropout."""
    flags = [f"--config.rng_impl={impl}", *FAST]
    whole = train_once(tmp_path / "whole", "configs/tiny.py", *flags, "--config.num_train_steps=6")
    split = tmp_path / "split"
    train_once(split, "configs/tiny.py", *flags, "--config.num_train_steps=3")
    train_once(split, "configs/tiny.py", *flags, "--config.num_train_steps=6")
    assert "resumed from" in (split / "train.stderr").read_text()
    assert sorted(_losses(whole)) == list(range(1, 7))
    assert _losses(split) == _losses(whole)
    threefry = _losses(tiny_workdir)
    assert [threefry[s] for s in range(1, 7)] != [_losses(whole)[s] for s in range(1, 7)]


@pytest.mark.parametrize("value", ["philox", "", 3, None, "Threefry"])
def test_an_unknown_generator_is_refused_naming_the_choices(value):
    config = tiny.get_config().to_dict()
    config["rng_impl"] = value
    with pytest.raises(
        ValueError, match=r"rng_impl must be one of \('threefry', 'rbg', 'unsafe_rbg'\)"
    ):
        validate_train_config(ml_collections.ConfigDict(config))


@pytest.mark.parametrize("impl, shard_rows", [("threefry", 2), ("rbg", 16), ("unsafe_rbg", 16)])
def test_where_each_generator_draws_a_sharded_masks_bits(impl, shard_rows):
    """On 8 devices splitting 16 rows, threefry draws each device's 2 rows of bits; XLA's
    partitioner leaves RngBitGenerator whole, so with rbg each device draws all 16 rows (what
    transformer_jax/rng.py says of it)."""
    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    rows = NamedSharding(mesh, P("data"))

    def drop(x, key):
        return jnp.where(jax.random.bernoulli(jax.random.fold_in(key, 1), 0.9, x.shape), x, 0)

    x = jax.device_put(jnp.ones((16, 24, 40)), rows)
    with jax.set_mesh(mesh):
        hlo = jax.jit(drop, out_shardings=rows).lower(x, rng.dropout_key(0, impl)).compile()
    shapes = {
        tuple(map(int, s.split(","))) for s in re.findall(r"u32\[(\d+,24,40)\]", hlo.as_text())
    }
    assert max(s[0] for s in shapes) == shard_rows, shapes
