"""One builder for a training config's state and compiled steps on a mesh, real or abstract.

Training builds the real state (initialised in its shards); `transformer-jax compile` builds
the same programs from shapes alone for any target's mesh. Both go through `build_programs`, so
what is compiled ahead of time is what trains.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
import optax
from flax import nnx
from jax.sharding import Mesh

from transformer_jax.training.optimizer import optimizer_from_config
from transformer_jax.training.state import (
    TrainState,
    abstract_train_state,
    abstract_with_shardings,
    create_train_state,
)
from transformer_jax.training.step import compile_steps


@dataclasses.dataclass(frozen=True)
class Programs:
    """A config's model and optimizer on a mesh and its jitted steps (the state itself is
    returned beside it: held here, a resumed run would keep its initial arrays alive).

    Attributes:
      graphdef: the model's structure (nnx), without its parameters.
      tx, schedule: the optimizer and its learning-rate schedule (step -> rate).
      shardings: the train state's NamedShardings.
      abstract_state: its ShapeDtypeStructs carrying them (what Orbax restores into).
      train_fn: `train_fn(state, batch, rng) -> (state, metrics)`, the state donated.
      eval_fn: `eval_fn(params, batch) -> sums`.
    """

    graphdef: nnx.GraphDef
    tx: optax.GradientTransformation
    schedule: Callable[[int], Any]
    shardings: TrainState
    abstract_state: TrainState
    train_fn: Any
    eval_fn: Any


def build_programs(
    config: ml_collections.ConfigDict,
    model_cfg: Any,
    task: Any,
    mesh: Mesh,
    *,
    abstract: bool = False,
) -> tuple[Programs, TrainState]:
    """The programs and the train state of `config` (resolved by its task) for `model_cfg` on
    `mesh`.

    Args:
      task: the task (or its class): its `loss_fn`, `normalizer` and `fresh_params`.
      abstract: shapes only, nothing allocated (compiling ahead of time); otherwise the
        parameters are initialised from `config.seed`, each shard where it lives.
    """
    tx, schedule = optimizer_from_config(config, model_cfg.d_model, task.fresh_params)
    if abstract:
        graphdef, state, shardings = abstract_train_state(model_cfg, tx, mesh)
    else:
        graphdef, state, shardings = create_train_state(model_cfg, tx, mesh, config.seed)
    train_fn, eval_fn = compile_steps(
        graphdef,
        tx,
        shardings,
        mesh,
        loss_fn=task.loss_fn,
        normalizer=task.normalizer,
        grad_accum_steps=config.grad_accum_steps,
    )
    abstract_state = abstract_with_shardings(jax.eval_shape(lambda s: s, state), shardings)
    programs = Programs(graphdef, tx, schedule, shardings, abstract_state, train_fn, eval_fn)
    return programs, state
