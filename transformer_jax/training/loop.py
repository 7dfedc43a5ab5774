"""The main job: `train_and_evaluate(config, workdir)`, for any registered model and task.

Sections: config and workdir -> task (data) -> mesh -> model and optimizer (born sharded)
-> restore -> the loop (one jitted step) -> evaluation -> checkpoints -> final test.
Re-running with the same workdir resumes from the latest checkpoint, with the same data order
and dropout keys as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import time

import jax
import ml_collections
import numpy as np
from flax import nnx

from transformer_jax import models, tasks
from transformer_jax.runs import reading
from transformer_jax.runs.checkpoints import Checkpoints, all_data_states, local_data_state
from transformer_jax.runs.identity import keep_identity, run_identity
from transformer_jax.runs.layout import RunIdentity, Workdir
from transformer_jax.runs.lock import lock_workdir
from transformer_jax.sharding import make_mesh
from transformer_jax.tasks.pretrained import init_fresh_names
from transformer_jax.training.config_guard import check_or_write_config
from transformer_jax.training.init_from import init_from_workdir
from transformer_jax.training.metrics_writer import MetricsWriter, format_duration
from transformer_jax.training.nonfinite import NonFiniteCounter
from transformer_jax.training.optimizer import optimizer_from_config
from transformer_jax.training.preemption import Preemption
from transformer_jax.training.profiling import Profiler, Utilisation
from transformer_jax.training.state import abstract_with_shardings, create_train_state
from transformer_jax.training.step import compile_steps, global_batch
from transformer_jax.training.validation import validate_train_config


def _evaluate(eval_fn, params, batches, mesh, task: tasks.Task) -> dict:
    sums = None
    for batch in batches:
        out = eval_fn(params, global_batch(batch, mesh))
        sums = out if sums is None else jax.tree.map(np.add, sums, out)
    return task.summarize(jax.device_get(sums)) if sums is not None else {}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Train, evaluate and checkpoint into `workdir` (local or gs://); returns final metrics.

    Holds the workdir's lock for the whole run (a second run on it refuses); SIGTERM makes it
    save and return early (rerun to resume).

    Raises:
      WorkdirBusyError: another run uses `workdir`.
      WorkdirNotWritableError: `workdir` cannot be written (before any training).
      NonFiniteError: `config.max_nonfinite_steps` steps in a row had a NaN/Inf loss or
        gradient (the last checkpoint is left as it was).
    """
    task_cls = validate_train_config(config)
    config = task_cls.resolve_config(config)
    workdir = Workdir.at(workdir)
    preempt = Preemption()  # First: a SIGTERM during the slow setup must not kill the run.
    try:
        with lock_workdir(workdir):
            return _train(config, workdir, task_cls, preempt)
    finally:
        preempt.restore_handler()


def _train(config, workdir: Workdir, task_cls, preempt: Preemption) -> dict:
    check_or_write_config(workdir, config, task_cls.model_defining_data_fields)
    identity = run_identity(workdir, config)
    log = MetricsWriter(
        workdir, enabled=jax.process_index() == 0, total_steps=config.num_train_steps
    )
    try:
        return _run(config, workdir, task_cls, preempt, log, identity)
    finally:
        log.close()


def _run(
    config,
    workdir: Workdir,
    task_cls,
    preempt: Preemption,
    log: MetricsWriter,
    identity: RunIdentity,
) -> dict:

    # ---------------------------------------------------------------- task and data
    task = task_cls(config, workdir)
    train_iter = task.train_iterator()
    eval_batches = task.eval_batches()

    # --------------------------------------------------------- mesh, model, optimizer
    mesh = make_mesh(dict(config.mesh))
    model_cfg = models.build_config(config.model, task.data_values())
    if jax.process_index() == 0:
        workdir.write_model(config.model.name, model_cfg)
    tx, schedule = optimizer_from_config(config, model_cfg.d_model, task.fresh_params)
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
        identity=identity,  # saved with every checkpoint, checked on restore
        keep=config.keep_checkpoints,
        best_metric=task.best_metric,
        best_mode=task.best_mode,
    )
    abstract = abstract_with_shardings(jax.eval_shape(lambda s: s, state), shardings)
    restored = ckpt.restore_intact(abstract)
    keep_identity(workdir, identity)  # A new run (or one older than identities): run.json.
    if restored is not None:
        state, data_state, _ = restored
        train_iter.set_state(local_data_state(data_state))
        log.message(f"resumed from {workdir.checkpoints} at step {int(state.step)}")
    elif config.get("init_from"):  # a new fine-tuning run (a resumed one has its checkpoint)
        fresh = init_fresh_names(config)
        state, note = init_from_workdir(state, config.init_from, model_cfg, task, fresh)
        log.message(note)

    # ------------------------------------------------------------------- the loop
    rng = jax.random.key(config.seed + 1)  # dropout; train_step folds in the step number
    step = int(state.step)
    window, window_start, last = [], time.time(), {}
    normalizer = task.normalizer
    previous = None  # the previous step's metrics: see the wait below
    nonfinite = NonFiniteCounter(config.max_nonfinite_steps)
    meta = {"seed": config.seed}
    utilisation = Utilisation.for_run(config, log.message)  # mfu on TPUs and GPUs
    profile = None
    try:
        profile = Profiler.for_run(config, workdir, step, log.message)  # profile_steps
        if preempt.requested:  # SIGTERM during the setup: nothing new to save.
            log.message(f"preempted before step {step + 1}; rerun the same command to resume.")
            return {"step": step, "preempted": True}
        while step < config.num_train_steps:
            batch = global_batch(next(train_iter), mesh)
            utilisation.count(train_fn, mesh, state, batch, rng)
            with profile.step(step + 1) if profile else contextlib.nullcontext():
                state, metrics = train_fn(state, batch, rng)
            if profile:
                profile.finished(step + 1, metrics)
            # Run at most one step ahead of the devices: a SIGTERM then waits for one step
            # before its save, not for a queue of them (a cloud's notice is about 30 s). And
            # unbounded asynchronous dispatch queues up to XLA's limit of in-flight programs
            # per device (32); XLA:CPU then blocks a launch on one of the few threads that
            # must all run the participants of a step's gradient all-reduce, and with many
            # simulated devices the all-reduce deadlocks.
            if previous is not None:
                jax.block_until_ready(previous)
                nonfinite.update(step, float(previous["nonfinite"]), ckpt)
            previous = metrics
            step += 1
            window.append(metrics)
            final = step == config.num_train_steps
            stop = preempt.reached(step)
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
                    "nonfinite_steps": float(sums["nonfinite"]),
                    **utilisation.window(elapsed),
                }
                log.write(step, "train", train)
                log.progress(step, train, len(window) / max(elapsed, 1e-9), normalizer)
                window, window_start = [], time.time()
            if (step % config.eval_every == 0 or final) and not (stop or preempt.requested):
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
                if task.best_metric in last:  # best/ follows every evaluation.
                    data_state = all_data_states(train_iter.get_state())
                    ckpt.save_best(step, state, data_state, meta, last[task.best_metric])
            stop = stop or preempt.reached(step)  # A SIGTERM during the evaluation.
            if step % config.checkpoint_every == 0 or final or stop:
                jax.block_until_ready(metrics)
                nonfinite.update(step, float(metrics["nonfinite"]), ckpt)
                previous = None
                data_state = all_data_states(train_iter.get_state())
                ckpt.save(step, state, data_state, meta, force=True)
            if stop:
                ckpt.wait()
                log.message(f"preempted: saved step {step}; rerun the same command to resume.")
                return {"step": step, "preempted": True, **last}
        ckpt.wait()
        params, test_step, which = _test_params(config, ckpt, state, abstract, task)
    finally:
        try:
            if profile:  # An error or a preemption inside the window: keep what was traced.
                profile.close()
            ckpt.wait()
        finally:
            ckpt.close()

    # ------------------------------------------------------------------- final test
    result = {"step": step, **last}
    started = time.time()
    test, line = task.evaluate(nnx.merge(graphdef, params), "test", mesh=mesh)
    if test:
        log.write(test_step, "test", test)
        log.message(f"test of {which} ({format_duration(time.time() - started)}): {line}")
        result["test"] = test
        result["test_step"] = test_step
    return result


def _test_params(config, ckpt: Checkpoints, state, abstract, task) -> tuple:
    """(parameters, their step, words saying which) for the final test: by default the best
    checkpoint by the task's validation metric, the last step's with
    `config.test_checkpoint="last"` (also when no validation metric was saved), or with "average"
    the element-wise mean of the last `config.test_average_last` checkpoints (ending at the last
    step, which is always saved; its step is reported)."""
    step = int(state.step)
    if config.get("test_checkpoint", "best") == "last":
        return state.params, step, f"the last step, {step} (config.test_checkpoint='last')"
    shardings = jax.tree.map(lambda x: x.sharding, abstract.params)
    if config.get("test_checkpoint") == "average":
        steps = reading.select_steps(ckpt.workdir, step, config.test_average_last)
        trees = [reading.restore_params(ckpt.workdir, s, abstract.params, shardings) for s in steps]
        listed = ", ".join(map(str, steps))
        which = f"the mean of the last {len(steps)} checkpoints (steps {listed})"
        return reading.average_params(trees), step, which
    saved = ckpt.best_saved()
    if saved is None:
        return state.params, step, f"the last step, {step} (no validation {task.best_metric})"
    best_step, value = saved
    which = f"step {best_step}, the best by validation {task.best_metric} ({value:.4g})"
    if best_step == step:
        return state.params, step, which
    params = reading.restore_params(ckpt.workdir, best_step, abstract.params, shardings, best=True)
    return params, best_step, f"{which}; the last step is {step}"
