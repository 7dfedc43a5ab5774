"""The training loop's periodic actions (see `transformer_jax.training.hooks`): the non-finite
guard, the training log, evaluation with the best checkpoint, the preemption check, the
checkpoint and the profiler's step. Each is a small callable on a `StepEnd`, testable alone."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import jax
import numpy as np

from transformer_jax.runs.checkpoints import all_data_states
from transformer_jax.training.hooks import StepEnd
from transformer_jax.training.nonfinite import NonFiniteCounter
from transformer_jax.training.step import global_batch


class NonFiniteGuard:
    """Counts non-finite steps (`NonFiniteCounter`) while running at most one step ahead of the
    devices: after step N it waits for step N-1's metrics, so that a SIGTERM waits for one
    step before its save, not for a queue of them (a cloud's notice is about 30 s). Unbounded
    asynchronous dispatch would also queue up to XLA's limit of in-flight programs per device
    (32); XLA:CPU then blocks a launch on one of the few threads that must all run the
    participants of a step's gradient all-reduce, and with many simulated devices the
    all-reduce deadlocks.

    Register it first, at every step; `settle` (before a save) checks the current step too.
    """

    def __init__(self, limit: int, ckpt=None):
        self.counter = NonFiniteCounter(limit)
        self.ckpt = ckpt  # Named in the error: the checkpoint to resume from.
        self._previous: tuple[int, dict] | None = None

    def __call__(self, end: StepEnd) -> None:
        self._count_previous(before=end.step)
        self._previous = (end.step, end.metrics)

    def settle(self, end: StepEnd) -> None:
        """Waits for this step and counts it (nothing is left in flight)."""
        self._count_previous(before=end.step)
        jax.block_until_ready(end.metrics)
        self.counter.update(end.step, float(end.metrics["nonfinite"]), self.ckpt)
        self._previous = None

    def _count_previous(self, before: int) -> None:
        """Waits for and counts the step held back, if it is an earlier one than `before`."""
        if self._previous is not None and self._previous[0] < before:
            step, metrics = self._previous
            jax.block_until_ready(metrics)
            self.counter.update(step, float(metrics["nonfinite"]), self.ckpt)
            self._previous = None


class TrainLog:
    """Sums the steps' metrics since the last log line (on the host: summing on the devices
    would dispatch one small program per metric and step) and writes them with the learning
    rate, the last step's gradient norm, throughput and utilisation."""

    def __init__(self, task, log, schedule: Callable[[int], Any], utilisation):
        self.task, self.log, self.schedule, self.utilisation = task, log, schedule, utilisation
        self.window: list[dict] = []
        self.start = time.time()

    def add(self, end: StepEnd) -> None:
        """Every step: keep its metrics for the next line."""
        self.window.append(end.metrics)

    def __call__(self, end: StepEnd) -> None:
        host = jax.device_get(self.window)
        sums = jax.tree.map(lambda *x: sum(x), *host)
        elapsed = max(time.time() - self.start, 1e-9)
        normalizer = self.task.normalizer
        train = self.task.summarize(sums) | {
            "learning_rate": float(self.schedule(end.step - 1)),
            "grad_norm": float(host[-1]["grad_norm"]),
            f"{normalizer}_per_sec": float(sums[normalizer]) / elapsed,
            "nonfinite_steps": float(sums["nonfinite"]),
            **self.utilisation.window(elapsed),
        }
        self.log.write(end.step, "train", train)
        self.log.progress(end.step, train, len(self.window) / elapsed, normalizer)
        self.window, self.start = [], time.time()


class Evaluation:
    """The validation loss (sums of the eval step over the eval batches, summarised by the
    task), the task's own evaluation (e.g. BLEU), the log lines, and the best checkpoint by the
    task's metric. `last` holds the latest figures."""

    def __init__(
        self,
        task,
        log,
        eval_fn,
        eval_batches: Iterable,
        mesh,
        model_of: Callable[[Any], Any],
        save_best: Callable[[int, Any, float], None],
    ):
        self.task, self.log, self.eval_fn, self.mesh = task, log, eval_fn, mesh
        self.eval_batches, self.model_of, self.save_best = eval_batches, model_of, save_best
        self.last: dict = {}

    def loss_sums(self, params) -> dict:
        """The task's summary of the eval step's sums over every eval batch ({} for none)."""
        sums = None
        for batch in self.eval_batches:
            out = self.eval_fn(params, global_batch(batch, self.mesh))
            sums = out if sums is None else jax.tree.map(np.add, sums, out)
        return self.task.summarize(jax.device_get(sums)) if sums is not None else {}

    def __call__(self, end: StepEnd) -> None:
        last = self.loss_sums(end.state.params)
        scores, line = self.task.evaluate(self.model_of(end.state.params), "eval", mesh=self.mesh)
        last |= scores
        if line:
            self.log.message(line)
        self.log.write(end.step, "eval", last)
        normalizer = self.task.normalizer
        self.log.message(
            f"eval @ {end.step}: "
            + ", ".join(f"{k} {v:.4g}" for k, v in last.items() if k != normalizer)
        )
        if self.task.best_metric in last:  # best/ follows every evaluation.
            self.save_best(end.step, end.state, last[self.task.best_metric])
        self.last = last


class Checkpoint:
    """Saves the step (train state, every process's data-iterator state, meta) after the
    non-finite guard has counted it, so nothing is in flight when it is written."""

    def __init__(self, ckpt, guard: NonFiniteGuard, data_state: Callable[[], dict], meta: dict):
        self.ckpt, self.guard, self.data_state, self.meta = ckpt, guard, data_state, meta

    def __call__(self, end: StepEnd) -> None:
        self.guard.settle(end)
        self.ckpt.save(
            end.step, end.state, all_data_states(self.data_state()), self.meta, force=True
        )

    def best(self, step: int, state, value: float) -> None:
        """Saves `step` as the best so far if `value` beats the best saved (`Checkpoints`)."""
        self.ckpt.save_best(step, state, all_data_states(self.data_state()), self.meta, value)


def preemption_check(reached: Callable[[int], bool]) -> Callable[[StepEnd], None]:
    """Sets `end.stopping` once every process has reached the preemption point (`reached`:
    `Preemption.reached`, which a multi-process run must call at every step)."""

    def check(end: StepEnd) -> None:
        end.stopping = end.stopping or reached(end.step)

    return check
