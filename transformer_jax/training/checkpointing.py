"""Orbax checkpoints of the whole run, the workdir's config guard, and preemption handling.

Where things live in a workdir is `transformer_jax.workdir`'s business; this module writes the
`checkpoints/` (the latest k saves, for resumption) and `best/` (the best save by the task's
validation metric: a separate manager, so "keep the best" never deletes the newest save).
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from typing import Any

import jax
import ml_collections
import orbax.checkpoint as ocp

from transformer_jax import models
from transformer_jax.workdir import Workdir, migrate


def config_conflicts(saved: dict, new: dict, data_fields: tuple[str, ...] = ()) -> list[str]:
    """Lines `field: saved -> new` for every model-defining field that differs.

    `data_fields` are the `config.data` fields that fix the parameters' shapes or the meaning
    of token ids (the task's `model_defining_data_fields`).

    Model sections are compared with omitted fields at their defaults, so a workdir written
    before a field existed still resumes when the new config keeps that default.
    """
    saved, new = migrate(saved), migrate(new)
    diffs = []
    if saved.get("task") != new.get("task"):
        diffs.append(f"task: {saved.get('task')!r} -> {new.get('task')!r}")
    a_model, b_model = saved.get("model", {}), new.get("model", {})
    if a_model.get("name") != b_model.get("name"):
        return diffs + [f"model.name: {a_model.get('name')!r} -> {b_model.get('name')!r}"]
    a_model, b_model = models.canonical_fields(a_model), models.canonical_fields(b_model)
    for key in sorted(set(a_model) | set(b_model)):
        a, b = a_model.get(key), b_model.get(key)
        if a != b:
            diffs.append(f"model.{key}: {a!r} -> {b!r}")
    for key in data_fields:
        a, b = saved.get("data", {}).get(key), new.get("data", {}).get(key)
        if a != b:
            diffs.append(f"data.{key}: {a!r} -> {b!r}")
    return diffs


def check_or_write_config(
    workdir: Workdir, config: ml_collections.ConfigDict, data_fields: tuple[str, ...] = ()
) -> None:
    """Write `config.json`, or refuse a config that conflicts with the one already there."""
    new = json.loads(config.to_json_best_effort())
    if workdir.config_json.exists():
        saved = json.loads(workdir.config_json.read_text())
        diffs = config_conflicts(saved, new, data_fields)
        if diffs:
            raise ValueError(
                f"{workdir} holds a run whose model or vocabulary differs from this config:\n  "
                + "\n  ".join(diffs)
                + "\nUse a new --workdir, or the same settings to resume the run."
            )
    if jax.process_index() == 0:
        workdir.path.mkdir(parents=True, exist_ok=True)
        workdir.write_config(config)


class Checkpoints:
    """The latest-k manager (for resumption) and the best-by-metric manager, saved together."""

    def __init__(
        self,
        workdir: Workdir,
        *,
        keep: int = 3,
        keep_best: int = 1,
        best_metric: str = "bleu",
        best_mode: str = "max",
    ):
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
        self.latest = ocp.CheckpointManager(workdir.checkpoints, options=options)
        best_options = ocp.CheckpointManagerOptions(
            max_to_keep=keep_best,
            create=True,
            best_fn=lambda metrics: metrics[best_metric],
            best_mode=best_mode,
        )
        self.best = ocp.CheckpointManager(workdir.best, options=best_options)
        self.best_metric = best_metric

    @staticmethod
    def _args(state, data_state: dict, meta: dict):
        return ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            data=ocp.args.JsonSave(data_state),
            meta=ocp.args.JsonSave(meta),
        )

    def save(self, step: int, state, data_state: dict, meta: dict, *, force: bool = False):
        """Asynchronous save of the full run at `step` (returns before the write finishes)."""
        self.latest.save(step, args=self._args(state, data_state, meta), force=force)

    def save_best(self, step: int, state, data_state: dict, meta: dict, value: float):
        """Saves into best/ when `value` of the best metric beats the kept ones."""
        metrics = {self.best_metric: value}
        self.best.save(step, args=self._args(state, data_state, meta), metrics=metrics)

    def latest_step(self) -> int | None:
        return self.latest.latest_step()

    def restore(self, abstract_state, step: int | None = None) -> tuple[Any, dict, dict]:
        """(state, data_state, meta) of `step` (default: latest), arrays in their shardings."""
        step = self.latest.latest_step() if step is None else step
        restored = self.latest.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract_state),
                data=ocp.args.JsonRestore(),
                meta=ocp.args.JsonRestore(),
            ),
        )
        return restored["state"], dict(restored["data"]), dict(restored["meta"])

    def wait(self):
        self.latest.wait_until_finished()
        self.best.wait_until_finished()

    def close(self):
        self.latest.close()
        self.best.close()


class PreemptionFlag:
    """Set by SIGTERM (how TPU VMs and most schedulers announce preemption).

    The train loop polls `flag.requested` after each step, saves, and exits cleanly.
    """

    def __init__(self):
        self.requested = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame):
        logging.warning("SIGTERM received: saving a checkpoint before exiting.")
        self.requested = True

    def restore_handler(self):
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
