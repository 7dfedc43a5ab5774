"""The main job: `train_and_evaluate(config, workdir)`, for any registered model and task.

Sections: config and workdir -> task (data) -> mesh -> model and optimizer (born sharded)
-> restore -> the loop (one jitted step) -> evaluation -> checkpoints -> final test.
Re-running with the same workdir resumes from the latest checkpoint, with the same data order
and dropout keys as an uninterrupted run.
"""

from __future__ import annotations

import time

import jax
import ml_collections
import numpy as np
from flax import nnx

from transformer_jax import models, tasks
from transformer_jax.sharding import make_mesh
from transformer_jax.training.checkpointing import (
    Checkpoints,
    PreemptionFlag,
    check_or_write_config,
)
from transformer_jax.training.init_from import init_from_workdir
from transformer_jax.training.metrics_writer import MetricsWriter, format_duration
from transformer_jax.training.optimizer import optimizer_from_config
from transformer_jax.training.state import abstract_with_shardings, create_train_state
from transformer_jax.training.step import compile_steps, global_batch
from transformer_jax.workdir import Workdir

_POSITIVE = (
    "num_train_steps",
    "warmup_steps",
    "log_every",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
    "grad_accum_steps",
)


def validate_train_config(config: ml_collections.ConfigDict) -> type[tasks.Task]:
    """Checks the whole config once, at the boundary; returns the task's class.

    Raises:
      ValueError: naming the first bad field and what to set instead.
    """
    for name in _POSITIVE:
        value = config[name]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"config.{name} must be a positive integer, got {value!r}.")
    rows = config.data.batch_multiple
    if config.grad_accum_steps > 1 and rows % config.grad_accum_steps:
        raise ValueError(
            f"config.grad_accum_steps={config.grad_accum_steps} must divide "
            f"config.data.batch_multiple={rows} so batches split into equal micro-batches."
        )
    if "task" not in config or "name" not in config.model:
        raise ValueError(
            "config.task and config.model.name must name the task and the model, e.g. "
            'c.task = "translation" and c.model = models.config_section("encoder_decoder", '
            '"base") as configs/common.py does.'
        )
    models.get(config.model.name)
    task_cls = tasks.get(config.task)
    task_cls.validate(config)
    return task_cls


def _evaluate(eval_fn, params, batches, mesh, task: tasks.Task) -> dict:
    sums = None
    for batch in batches:
        out = eval_fn(params, global_batch(batch, mesh))
        sums = out if sums is None else jax.tree.map(np.add, sums, out)
    return task.summarize(jax.device_get(sums)) if sums is not None else {}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Train, evaluate and checkpoint into `workdir` (local or gs://); returns final metrics."""
    task_cls = validate_train_config(config)
    config = task_cls.resolve_config(config)
    workdir = Workdir.at(workdir)
    check_or_write_config(workdir, config, task_cls.model_defining_data_fields)
    log = MetricsWriter(
        workdir, enabled=jax.process_index() == 0, total_steps=config.num_train_steps
    )

    # ---------------------------------------------------------------- task and data
    task = task_cls(config, workdir)
    train_iter = task.train_iterator()
    eval_batches = task.eval_batches()

    # --------------------------------------------------------- mesh, model, optimizer
    mesh = make_mesh(dict(config.mesh))
    model_cfg = models.build_config(config.model, task.data_values())
    if jax.process_index() == 0:
        workdir.write_model(config.model.name, model_cfg)
    tx, schedule = optimizer_from_config(config, model_cfg.d_model)
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
    log.message(
        f"model: {config.model.name}, {sum(x.size for x in jax.tree.leaves(state.params)):,} "
        f"parameters, task {task.name}, mesh {dict(mesh.shape)}, {jax.device_count()} devices"
    )

    # ------------------------------------------------------------------- restore
    ckpt = Checkpoints(
        workdir,
        keep=config.keep_checkpoints,
        best_metric=task.best_metric,
        best_mode=task.best_mode,
    )
    if ckpt.latest_step() is not None:
        abstract = abstract_with_shardings(jax.eval_shape(lambda s: s, state), shardings)
        state, data_state, _ = ckpt.restore(abstract)
        train_iter.set_state(data_state)
        log.message(f"resumed from {workdir.checkpoints} at step {int(state.step)}")
    elif config.get("init_from"):  # a new fine-tuning run (a resumed one has its checkpoint)
        state, note = init_from_workdir(state, config.init_from, model_cfg, task.fresh_params)
        log.message(note)

    # ------------------------------------------------------------------- the loop
    rng = jax.random.key(config.seed + 1)  # dropout; train_step folds in the step number
    preempt = PreemptionFlag()
    step = int(state.step)
    window, window_start, last = [], time.time(), {}
    normalizer = task.normalizer
    previous = None  # the previous step's metrics: see the wait below
    try:
        while step < config.num_train_steps:
            state, metrics = train_fn(state, global_batch(next(train_iter), mesh), rng)
            # Run at most one step ahead of the devices. Unbounded asynchronous dispatch queues
            # up to XLA's limit of in-flight programs per device (32); XLA:CPU then blocks a
            # launch on one of the few threads that must all run the participants of a step's
            # gradient all-reduce, and with many simulated devices the all-reduce deadlocks.
            if previous is not None:
                jax.block_until_ready(previous)
            previous = metrics
            step += 1
            window.append(metrics)
            final = step == config.num_train_steps
            if step % config.log_every == 0 or final:
                # Sum on the host: summing on the devices would dispatch one small program per
                # metric and step of the window.
                host = jax.device_get(window)
                sums = jax.tree.map(lambda *x: sum(x), *host)
                elapsed = time.time() - window_start
                train = task.summarize(sums) | {
                    "learning_rate": float(schedule(step - 1)),
                    "grad_norm": float(host[-1]["grad_norm"]),
                    f"{normalizer}_per_sec": float(sums[normalizer]) / max(elapsed, 1e-9),
                }
                log.write(step, "train", train)
                log.progress(step, train, len(window) / max(elapsed, 1e-9), normalizer)
                window, window_start = [], time.time()
            if step % config.eval_every == 0 or final:
                last = _evaluate(eval_fn, state.params, eval_batches, mesh, task)
                scores, line = task.evaluate(nnx.merge(graphdef, state.params), "eval", mesh=mesh)
                last |= scores
                if line:
                    log.message(line)
                log.write(step, "eval", last)
                log.message(
                    f"eval @ {step}: "
                    + ", ".join(f"{k} {v:.4g}" for k, v in last.items() if k != normalizer)
                )
            if step % config.checkpoint_every == 0 or final or preempt.requested:
                ckpt.save(step, state, train_iter.get_state(), {"seed": config.seed}, force=True)
                if task.best_metric in last and step % config.eval_every == 0:
                    ckpt.save_best(
                        step,
                        state,
                        train_iter.get_state(),
                        {"seed": config.seed},
                        last[task.best_metric],
                    )
            if preempt.requested:
                log.message(f"preempted: saved step {step}; rerun the same command to resume.")
                break
    finally:
        ckpt.wait()
        ckpt.close()
        preempt.restore_handler()

    # ------------------------------------------------------------------- final test
    result = {"step": step, **last}
    if step >= config.num_train_steps:
        started = time.time()
        test, line = task.evaluate(nnx.merge(graphdef, state.params), "test", mesh=mesh)
        if test:
            log.write(step, "test", test)
            log.message(f"test ({format_duration(time.time() - started)}): {line}")
            result["test"] = test
    log.close()
    return result
