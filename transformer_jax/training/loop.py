"""The main job: `train_and_evaluate(config, workdir)`, for any registered model and task.

Sections: config and workdir -> task (data) -> mesh -> model and optimizer (born sharded)
-> restore -> the loop (one jitted step) -> evaluation -> checkpoints -> final test.
Re-running with the same workdir resumes from the latest checkpoint, with the same data order
and dropout keys as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import jax
import ml_collections
from flax import nnx

from transformer_jax import models
from transformer_jax.rng import dropout_key
from transformer_jax.runs import reading
from transformer_jax.runs.checkpoints import Checkpoints, local_data_state
from transformer_jax.runs.identity import keep_identity, run_identity
from transformer_jax.runs.layout import RunIdentity, Workdir
from transformer_jax.runs.lock import lock_workdir
from transformer_jax.sharding import make_mesh
from transformer_jax.tasks.pretrained import init_fresh_names
from transformer_jax.training.actions import (
    Checkpoint,
    Evaluation,
    NonFiniteGuard,
    TrainLog,
    preemption_check,
)
from transformer_jax.training.config_guard import check_or_write_config, recorded_batch_multiple
from transformer_jax.training.hooks import Hooks, StepEnd
from transformer_jax.training.init_from import init_from_workdir
from transformer_jax.training.metrics_writer import MetricsWriter, format_duration
from transformer_jax.training.preemption import Preemption
from transformer_jax.training.profiling import Profiler, Utilisation
from transformer_jax.training.programs import build_programs
from transformer_jax.training.step import global_batch
from transformer_jax.training.validation import fit_batch_multiple, validate_train_config


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
    workdir = Workdir.at(workdir)
    config = fit_batch_multiple(config, jax.device_count(), recorded_batch_multiple(workdir))
    task_cls = validate_train_config(config)
    config = task_cls.resolve_config(config)
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
    programs, state = build_programs(config, model_cfg, task, mesh)
    graphdef, train_fn = programs.graphdef, programs.train_fn
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
    abstract = programs.abstract_state
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
    rng = dropout_key(config.seed, config.get("rng_impl", "threefry"))  # folded with each step
    step = int(state.step)
    utilisation = Utilisation.for_run(config, log.message)  # mfu on TPUs and GPUs
    guard = NonFiniteGuard(config.max_nonfinite_steps, ckpt)
    train_log = TrainLog(task, log, programs.schedule, utilisation)
    saver = Checkpoint(ckpt, guard, train_iter.get_state, meta={"seed": config.seed})
    evaluation = Evaluation(
        task,
        log,
        programs.eval_fn,
        eval_batches,
        mesh,
        model_of=lambda params: nnx.merge(graphdef, params),
        save_best=saver.best,
    )
    profile = None
    try:
        profile = Profiler.for_run(config, workdir, step, log.message)  # profile_steps
        if preempt.requested:  # SIGTERM during the setup: nothing new to save.
            log.message(f"preempted before step {step + 1}; rerun the same command to resume.")
            return {"step": step, "preempted": True}
        hooks = periodic_actions(
            config, profile, guard, train_log, evaluation, saver, preempt.reached
        )
        while step < config.num_train_steps:
            batch = global_batch(next(train_iter), mesh)
            utilisation.count(train_fn, mesh, state, batch, rng)
            with profile.step(step + 1) if profile else contextlib.nullcontext():
                state, metrics = train_fn(state, batch, rng)
            step += 1
            final = step == config.num_train_steps
            end = StepEnd(step, final, state, metrics, signalled=lambda: preempt.requested)
            hooks.run(end)
            if end.stopping:
                ckpt.wait()
                log.message(f"preempted: saved step {step}; rerun the same command to resume.")
                return {"step": step, "preempted": True, **evaluation.last}
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
    result = {"step": step, **evaluation.last}
    started = time.time()
    test, line = task.evaluate(nnx.merge(graphdef, params), "test", mesh=mesh)
    if test:
        log.write(test_step, "test", test)
        log.message(f"test of {which} ({format_duration(time.time() - started)}): {line}")
        result["test"] = test
        result["test_step"] = test_step
    return result


def periodic_actions(
    config, profile, guard, train_log, evaluation, saver, reached: Callable[[int], bool]
) -> Hooks:
    """The loop's actions after each step, in order (see `transformer_jax.training.hooks`).

    A preemption (`reached`: `Preemption.reached`) is checked before the log (the step is then
    saved, not evaluated) and again after the evaluation (a SIGTERM during it); every process
    checks at every step.
    """
    hooks = Hooks()
    if profile:
        hooks.add("profile", lambda end: profile.finished(end.step, end.metrics))
    hooks.add("non-finite guard", guard)
    hooks.add("log window", train_log.add)
    hooks.add("preemption", preemption_check(reached))
    hooks.add("log", train_log, every=config.log_every)
    hooks.add("evaluate", evaluation, every=config.eval_every, when_stopping="skip")
    hooks.add("preemption after evaluation", preemption_check(reached))
    hooks.add("checkpoint", saver, every=config.checkpoint_every, when_stopping="run")
    return hooks


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
