"""The train state and its creation directly in its shardings (parameters born sharded)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx, struct
from jax.sharding import Mesh

from transformer_jax import models
from transformer_jax import sharding as shd


@struct.dataclass
class TrainState:
    """Everything a step reads and writes: an explicit pytree, nothing hidden in modules."""

    step: Any  # int32 scalar array: updates done so far (or its sharding / abstract shape).
    params: Any  # nnx.State of the model parameters (nnx.Param leaves).
    opt_state: Any  # Optax state (Adam moments and counters).


def create_train_state(
    model_cfg: Any, tx: optax.GradientTransformation, mesh: Mesh, seed: int
) -> tuple[nnx.GraphDef, TrainState, TrainState]:
    """Initialise any registered model's parameters and optimizer state in their shardings.

    The initializer is traced abstractly first (`eval_shape`), the shardings are read from the
    parameters' logical axes, and the jitted initializer writes each shard where it lives: the
    full model never sits on one device.

    Returns:
      (graphdef, state, state_shardings).
    """
    graphdef, init, _, shardings = _initializer(model_cfg, tx, mesh)
    state = jax.jit(init, out_shardings=shardings)(jax.random.key(seed))
    return graphdef, state, shardings


def abstract_train_state(
    model_cfg: Any, tx: optax.GradientTransformation, mesh: Mesh
) -> tuple[nnx.GraphDef, TrainState, TrainState]:
    """The train state's shapes, dtypes and shardings, nothing allocated: what a step is
    compiled from ahead of time (`transformer_jax.aot`), on any devices.

    Returns:
      (graphdef, state of ShapeDtypeStructs carrying their NamedShardings, state_shardings).
    """
    graphdef, _, abstract_state, shardings = _initializer(model_cfg, tx, mesh)
    return graphdef, abstract_with_shardings(abstract_state, shardings), shardings


def _initializer(model_cfg, tx, mesh):
    """(graphdef, init(key) -> TrainState, its abstract result, its shardings)."""
    graphdef, abstract_params = models.abstract_model(model_cfg)
    p_shard = shd.param_shardings(abstract_params, mesh)

    def init(key):
        _, params = nnx.split(models.build_model(model_cfg, rngs=nnx.Rngs(params=key)))
        return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))

    abstract_state = jax.eval_shape(init, jax.random.key(0))
    return graphdef, init, abstract_state, state_shardings(abstract_state, tx, p_shard, mesh)


def state_shardings(abstract_state: TrainState, tx, p_shard, mesh: Mesh) -> TrainState:
    """Shardings of a TrainState: optimizer moments follow their parameters."""
    rep = shd.replicated(mesh)
    p_plain = jax.tree.map(lambda v: v, p_shard)
    opt = optax.tree_map_params(
        tx,
        lambda _, s: s,
        abstract_state.opt_state,
        p_plain,
        transform_non_params=lambda _: rep,
        is_leaf=lambda x: isinstance(x, nnx.Variable),
    )
    return TrainState(step=rep, params=p_plain, opt_state=opt)


def abstract_with_shardings(abstract_state, shardings):
    """ShapeDtypeStructs carrying concrete NamedShardings: the target Orbax restores into."""
    return jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract_state, shardings
    )
