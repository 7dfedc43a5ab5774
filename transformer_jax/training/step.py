"""The pure train and eval steps of any task, and their compilation with explicit shardings.

`train_step(state, batch, rng)` and `eval_step(params, batch)` are plain functions of pytrees;
the task supplies `loss_fn(model, batch, rng, deterministic) -> (loss_sum, metric_sums)`, whose
sums hold the count the loss is averaged over under the task's `normalizer` key (target tokens
for translation). `compile_steps` jits each step once, with the state donated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh

from transformer_jax import sharding as shd
from transformer_jax.training.state import TrainState

LossFn = Callable[[nnx.Module, dict, jax.Array | None, bool], tuple[jax.Array, dict]]


def _loss(params, graphdef, loss_fn: LossFn, batch, rng, deterministic):
    return loss_fn(nnx.merge(graphdef, params), batch, rng, deterministic)


def train_step(
    state: TrainState,
    batch: dict[str, jax.Array],
    rng: jax.Array,
    *,
    graphdef,
    tx: optax.GradientTransformation,
    loss_fn: LossFn,
    normalizer: str = "tokens",
    grad_accum_steps: int = 1,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One update on the task's loss, averaged over `metric_sums[normalizer]`.

    With `grad_accum_steps > 1` the batch is cut into that many micro-batches along its rows;
    their gradients of summed losses are added and divided by the total count, so the update
    equals that of the whole batch at once, in a fraction of the activation memory. The dropout
    key is `rng` folded with the step number (and the micro-batch index).

    A step whose loss sums or gradients hold a NaN or an Inf leaves the parameters and the
    optimizer state as they were (the step counter still advances) and reports `nonfinite` 1.

    Returns the new state and the metric sums plus the global gradient norm `grad_norm` and
    `nonfinite` (1.0 when the update was skipped, else 0.0).
    """
    step_rng = jax.random.fold_in(rng, state.step)
    grad_fn = jax.grad(_loss, has_aux=True)

    def micro(i, mb):
        return grad_fn(state.params, graphdef, loss_fn, mb, jax.random.fold_in(step_rng, i), False)

    if grad_accum_steps == 1:
        grads, sums = micro(0, batch)
    else:

        def split(x):
            return x.reshape(grad_accum_steps, x.shape[0] // grad_accum_steps, *x.shape[1:])

        micro_batches = jax.tree.map(split, batch)

        def body(carry, xs):
            i, mb = xs
            g, s = micro(i, mb)
            return jax.tree.map(jnp.add, carry, (g, s)), None

        zeros = jax.tree.map(
            jnp.zeros_like, jax.eval_shape(micro, 0, jax.tree.map(lambda x: x[0], micro_batches))
        )
        (grads, sums), _ = jax.lax.scan(body, zeros, (jnp.arange(grad_accum_steps), micro_batches))
    count = jnp.maximum(sums[normalizer], 1.0)
    grads = jax.tree.map(lambda g: g / count, grads)
    grad_norm = optax.tree.norm(grads)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    # A NaN/Inf loss or gradient must not reach the parameters or Adam's moments: keep the old
    # ones (the step still counts, so the next batch and dropout key follow as usual). A
    # select, not a lax.cond: on a TPU the branch moved as many HBM bytes and added copies of
    # the whole state in on-chip memory (the compile report's figures, docs/performance.md).
    finite = jnp.isfinite(grad_norm) & all_finite(sums)
    params, opt_state = jax.tree.map(
        lambda new, old: jnp.where(finite, new, old),
        (params, opt_state),
        (state.params, state.opt_state),
    )
    metrics = {**sums, "grad_norm": grad_norm, "nonfinite": 1.0 - finite.astype(jnp.float32)}
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics


def all_finite(tree) -> jax.Array:
    """Whether every floating-point leaf of `tree` is finite (a boolean scalar)."""
    checks = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)
    ]
    return jnp.all(jnp.stack(checks)) if checks else jnp.array(True)


def eval_step(
    params: nnx.State, batch: dict[str, jax.Array], *, graphdef, loss_fn: LossFn
) -> dict[str, jax.Array]:
    """Metric sums of one evaluation batch, dropout off."""
    _, sums = _loss(params, graphdef, loss_fn, batch, None, True)
    return sums


def compile_steps(
    graphdef,
    tx,
    shardings: TrainState,
    mesh: Mesh,
    *,
    loss_fn: LossFn,
    normalizer: str = "tokens",
    grad_accum_steps: int = 1,
):
    """The jitted train and eval steps, each compiled once for a given batch shape.

    Returns `(train_fn(state, batch, rng), eval_fn(params, batch))`; `train_fn` donates the state.
    """
    batch_s = shd.batch_sharding(mesh)
    rep = shd.replicated(mesh)
    train_fn = jax.jit(
        functools.partial(
            train_step,
            graphdef=graphdef,
            tx=tx,
            loss_fn=loss_fn,
            normalizer=normalizer,
            grad_accum_steps=grad_accum_steps,
        ),
        in_shardings=(shardings, batch_s, rep),
        out_shardings=(shardings, rep),
        donate_argnums=(0,),
    )
    eval_fn = jax.jit(
        functools.partial(eval_step, graphdef=graphdef, loss_fn=loss_fn),
        in_shardings=(shardings.params, batch_s),
        out_shardings=rep,
    )
    return shd.under_mesh(train_fn, mesh), shd.under_mesh(eval_fn, mesh)


def global_batch(local_batch: dict[str, Any], mesh: Mesh) -> dict[str, jax.Array]:
    """Assemble host-local numpy batches into global arrays sharded over the batch axes."""
    sharding = shd.batch_sharding(mesh)
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local_batch.items()}
