"""The train state, the optimizer, and the pure train / eval steps.

`train_step(state, batch, rng)` and `eval_step(params, batch)` are plain functions of pytrees;
`compile_steps` jits each once with explicit shardings and the state donated.

Batch keys (from `transformer_jax.data`): `src` [B, S], `tgt_in` [B, T], `tgt_out` [B, T],
`weights` [B, T], and for packed rows `src_segment_ids`, `src_positions`, `tgt_segment_ids`,
`tgt_positions`.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx, struct
from jax.sharding import Mesh, NamedSharding

from transformer_jax import sharding as shd
from transformer_jax.config import TransformerConfig
from transformer_jax.losses import token_metrics
from transformer_jax.model import Transformer
from transformer_jax.schedules import noam_schedule

MODEL_KEYS = ("src_segment_ids", "tgt_segment_ids", "src_positions", "tgt_positions")


@struct.dataclass
class TrainState:
    """Everything a step reads and writes: an explicit pytree, nothing hidden in modules."""

    step: Any  # int32 scalar array: updates done so far (or its sharding / abstract shape).
    params: Any  # nnx.State of the model parameters (nnx.Param leaves).
    opt_state: Any  # Optax state (Adam moments and counters).


def make_optimizer(
    d_model: int,
    *,
    warmup_steps: int = 4000,
    lr_factor: float = 1.0,
    b1: float = 0.9,
    b2: float = 0.98,
    eps: float = 1e-9,
    grad_clip_norm: float = 0.0,
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Adam(beta1=0.9, beta2=0.98, eps=1e-9) with the Noam schedule (§5.3); optional clipping."""
    schedule = noam_schedule(d_model, warmup_steps, lr_factor)
    parts = [optax.clip_by_global_norm(grad_clip_norm)] if grad_clip_norm > 0 else []
    parts.append(optax.adam(schedule, b1=b1, b2=b2, eps=eps))
    return optax.chain(*parts), schedule


def _loss_sums(graphdef, params, batch, rng, label_smoothing, deterministic):
    model = nnx.merge(graphdef, params)
    logits = model(
        batch["src"],
        batch["tgt_in"],
        **{k: batch[k] for k in MODEL_KEYS if k in batch},
        rng=rng,
        deterministic=deterministic,
    )
    sums = token_metrics(logits, batch["tgt_out"], batch["weights"], label_smoothing)
    return sums["loss_sum"], sums


def train_step(
    state: TrainState,
    batch: dict[str, jax.Array],
    rng: jax.Array,
    *,
    graphdef,
    tx: optax.GradientTransformation,
    label_smoothing: float = 0.1,
    grad_accum_steps: int = 1,
) -> tuple[TrainState, dict[str, jax.Array]]:
    """One Adam update on the mean label-smoothed loss over the batch's non-pad target tokens.

    With `grad_accum_steps > 1` the batch is cut into that many micro-batches along its rows;
    their gradients of summed token losses are added and divided by the total token count, so
    the update equals that of the whole batch at once, in a fraction of the activation memory.
    The dropout key is `rng` folded with the step number (and the micro-batch index).

    Returns the new state and metric sums (`loss_sum`, `nll_sum`, `correct_sum`, `tokens`)
    plus the global gradient norm `grad_norm`.
    """
    step_rng = jax.random.fold_in(rng, state.step)
    grad_fn = jax.grad(_loss_sums, argnums=1, has_aux=True)

    def micro(i, mb):
        return grad_fn(
            graphdef, state.params, mb, jax.random.fold_in(step_rng, i), label_smoothing, False
        )

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
    tokens = jnp.maximum(sums["tokens"], 1.0)
    grads = jax.tree.map(lambda g: g / tokens, grads)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = {**sums, "grad_norm": optax.tree.norm(grads)}
    return state.replace(step=state.step + 1, params=params, opt_state=opt_state), metrics


def eval_step(
    params: nnx.State, batch: dict[str, jax.Array], *, graphdef, label_smoothing: float = 0.1
) -> dict[str, jax.Array]:
    """Metric sums of one evaluation batch, dropout off."""
    _, sums = _loss_sums(graphdef, params, batch, None, label_smoothing, True)
    return sums


def abstract_model(cfg: TransformerConfig):
    """(graphdef, abstract parameter state) of `Transformer(cfg)`; nothing is allocated."""
    return nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))


def create_train_state(
    cfg: TransformerConfig, tx: optax.GradientTransformation, mesh: Mesh, seed: int
) -> tuple[Any, TrainState, TrainState]:
    """Initialise parameters and optimizer state directly in their shardings.

    The initializer is traced abstractly first (`eval_shape`), the shardings are read from the
    parameters' logical axes, and the jitted initializer writes each shard where it lives: the
    full model never sits on one device.

    Returns:
      (graphdef, state, state_shardings).
    """
    graphdef, abstract_params = abstract_model(cfg)
    p_shard = shd.param_shardings(abstract_params, mesh)

    def init(key):
        _, params = nnx.split(Transformer(cfg, rngs=nnx.Rngs(params=key)))
        return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params))

    abstract_state = jax.eval_shape(init, jax.random.key(0))
    shardings = state_shardings(abstract_state, tx, p_shard, mesh)
    state = jax.jit(init, out_shardings=shardings)(jax.random.key(seed))
    return graphdef, state, shardings


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


def compile_steps(
    graphdef,
    tx,
    shardings: TrainState,
    mesh: Mesh,
    *,
    label_smoothing: float,
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
            label_smoothing=label_smoothing,
            grad_accum_steps=grad_accum_steps,
        ),
        in_shardings=(shardings, batch_s, rep),
        out_shardings=(shardings, rep),
        donate_argnums=(0,),
    )
    eval_fn = jax.jit(
        functools.partial(eval_step, graphdef=graphdef, label_smoothing=label_smoothing),
        in_shardings=(shardings.params, batch_s),
        out_shardings=rep,
    )
    return _under_mesh(train_fn, mesh), _under_mesh(eval_fn, mesh)


def _under_mesh(jitted, mesh: Mesh):
    """Call (and so trace) `jitted` with `mesh` set, so activation constraints see the mesh."""

    @functools.wraps(jitted)
    def call(*args):
        with jax.set_mesh(mesh):
            return jitted(*args)

    call.jitted = jitted  # for `.lower(...)` and compile counting
    return call


def global_batch(local_batch: dict, mesh: Mesh) -> dict[str, jax.Array]:
    """Assemble host-local numpy batches into global arrays sharded over the batch axes."""
    sharding: NamedSharding = shd.batch_sharding(mesh)
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local_batch.items()}
