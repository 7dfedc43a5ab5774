"""The training loop's periodic actions, each alone, and the order the loop runs them in."""

import logging

import ml_collections
import numpy as np
import pytest

from transformer_jax.sharding import make_mesh
from transformer_jax.training.actions import (
    Checkpoint,
    Evaluation,
    NonFiniteGuard,
    TrainLog,
    preemption_check,
)
from transformer_jax.training.hooks import Hooks, StepEnd
from transformer_jax.training.loop import periodic_actions
from transformer_jax.training.nonfinite import NonFiniteError


def _end(step, final=False, stopping=False, metrics=None, state=None, signalled=False):
    return StepEnd(step, final, state, metrics or {}, stopping, lambda: signalled)


def _recorder(calls, name):
    return lambda end: calls.append((name, end.step))


# ---------------------------------------------------------------------------- Hooks
def test_actions_run_every_n_steps_and_at_the_last_step_in_order():
    calls, hooks = [], Hooks()
    hooks.add("a", _recorder(calls, "a"), every=2)
    hooks.add("b", _recorder(calls, "b"), every=3)
    for step in range(1, 8):
        hooks.run(_end(step, final=step == 7))
    assert calls == [("a", 2), ("b", 3), ("a", 4), ("a", 6), ("b", 6), ("a", 7), ("b", 7)]
    assert hooks.names == ["a", "b"]


def test_a_stopping_step_skips_runs_or_keeps_each_action_as_registered():
    calls, hooks = [], Hooks()
    hooks.add("usual", _recorder(calls, "usual"), every=2)
    hooks.add("skip", _recorder(calls, "skip"), every=2, when_stopping="skip")
    hooks.add("run", _recorder(calls, "run"), every=10, when_stopping="run")
    hooks.run(_end(4, stopping=True))
    assert calls == [("usual", 4), ("run", 4)]
    calls.clear()
    hooks.run(_end(6, signalled=True))  # A signal this process got: no evaluation either.
    assert calls == [("usual", 6)]


def test_an_action_can_stop_the_run_for_the_actions_after_it():
    calls, hooks = [], Hooks()
    hooks.add("preemption", preemption_check(lambda step: step == 3))
    hooks.add("save", _recorder(calls, "save"), every=100, when_stopping="run")
    end = _end(2)
    hooks.run(end)
    assert not end.stopping and calls == []
    end = _end(3)
    hooks.run(end)
    assert end.stopping and calls == [("save", 3)]


@pytest.mark.parametrize(
    "kwargs, message",
    [({"every": 0}, "every=0 must be an integer >= 1"), ({"when_stopping": "x"}, "'usual'")],
)
def test_bad_registrations_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Hooks().add("log", lambda end: None, **kwargs)


# ---------------------------------------------------------------------------- the actions
def test_the_guard_counts_each_step_one_step_late_and_settles_before_a_save(caplog):
    guard = NonFiniteGuard(limit=2)
    bad, good = {"nonfinite": np.float32(1)}, {"nonfinite": np.float32(0)}
    guard(_end(1, metrics=bad))
    assert guard.counter.total == 0  # Step 1 is counted after step 2 was dispatched.
    with caplog.at_level(logging.WARNING):
        guard(_end(2, metrics=good))
    assert guard.counter.total == 1 and "step 1: non-finite" in caplog.text
    guard(_end(3, metrics=bad))
    guard.settle(_end(3, metrics=bad))  # Counted at once, step 2 first; nothing in flight.
    assert guard.counter.total == 2 and guard.counter.in_a_row == 1
    guard(_end(4, metrics=bad))
    with pytest.raises(NonFiniteError, match="steps 3-4: 2 steps in a row"):
        guard(_end(5, metrics=good))


class _Task:
    normalizer, best_metric = "tokens", "accuracy"

    @staticmethod
    def summarize(sums):
        return {"loss": float(sums["loss"]) / float(sums["tokens"])}

    @staticmethod
    def evaluate(model, split, mesh=None):
        return {"accuracy": 0.5 + model}, "accuracy line"


class _Log:
    def __init__(self):
        self.records, self.lines = [], []

    def write(self, step, split, record):
        self.records.append((step, split, record))

    def progress(self, step, record, steps_per_sec, normalizer):
        self.lines.append(("progress", step))

    def message(self, line):
        self.lines.append(line)


class _Utilisation:
    @staticmethod
    def window(elapsed):
        return {}


def test_the_log_sums_its_window_and_starts_a_new_one():
    log = _Log()
    train_log = TrainLog(_Task, log, schedule=lambda step: 0.1 * step, utilisation=_Utilisation)
    for step, loss in ((1, 4.0), (2, 2.0)):
        metrics = {"loss": loss, "tokens": 2.0, "grad_norm": step, "nonfinite": 0.0}
        train_log.add(_end(step, metrics=metrics))
    train_log(_end(2))
    ((step, split, record),) = log.records
    assert (step, split) == (2, "train") and record["loss"] == 1.5
    assert record["learning_rate"] == pytest.approx(0.1) and record["grad_norm"] == 2
    assert train_log.window == [] and log.lines == [("progress", 2)]


def test_evaluation_logs_its_figures_and_offers_the_best_checkpoint():
    log, best = _Log(), []
    state = ml_collections.ConfigDict({"params": 0.25})
    evaluation = Evaluation(
        _Task,
        log,
        eval_fn=lambda params, batch: {"loss": np.float32(3), "tokens": np.float32(2)},
        eval_batches=[{"x": np.zeros((8, 1), np.int32)}] * 2,
        mesh=make_mesh({"data": -1}),
        model_of=lambda params: params,
        save_best=lambda step, state, value: best.append((step, value)),
    )
    evaluation(_end(10, state=state))
    assert evaluation.last == {"loss": 1.5, "accuracy": 0.75}
    assert best == [(10, 0.75)] and log.records == [(10, "eval", evaluation.last)]
    assert "accuracy line" in log.lines and "eval @ 10: loss 1.5, accuracy 0.75" in log.lines


def test_a_checkpoint_is_saved_after_its_step_is_counted():
    saves, guard = [], NonFiniteGuard(limit=1)

    class Ckpt:
        def save(self, step, state, data_state, meta, force):
            saves.append((step, state, data_state, meta, force, guard.counter.total))

    saver = Checkpoint(Ckpt(), guard, data_state=lambda: {"epoch": 3}, meta={"seed": 1})
    saver(_end(5, state="s", metrics={"nonfinite": np.float32(0)}))
    assert saves == [(5, "s", {"epoch": 3}, {"seed": 1}, True, 0)]
    with pytest.raises(NonFiniteError):  # A non-finite step is not saved over the last good.
        saver(_end(6, state="t", metrics={"nonfinite": np.float32(1)}))
    assert len(saves) == 1


def test_the_loop_checks_preemption_around_the_evaluation_and_saves_last():
    config = ml_collections.ConfigDict({"log_every": 1, "eval_every": 1, "checkpoint_every": 9})
    calls = []

    class Named:
        def __init__(self, name):
            self.name = name

        def __call__(self, end):
            calls.append((self.name, end.step))

        def add(self, end):
            calls.append(("window", end.step))

    hooks = periodic_actions(
        config,
        None,
        Named("guard"),
        Named("log"),
        Named("eval"),
        Named("save"),
        lambda step: step == 2,
    )
    assert hooks.names == [
        "non-finite guard", "log window", "preemption", "log", "evaluate",
        "preemption after evaluation", "checkpoint",
    ]  # fmt: skip
    hooks.run(_end(1))
    assert [name for name, _ in calls] == ["guard", "window", "log", "eval"]
    calls.clear()
    end = _end(2)
    hooks.run(end)  # Preempted: logged and saved, not evaluated.
    assert [name for name, _ in calls] == ["guard", "window", "log", "save"] and end.stopping
