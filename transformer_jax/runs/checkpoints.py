"""Writing and restoring a training run's Orbax checkpoints: train state, data state, meta.

Where things live in a workdir is `transformer_jax.runs.layout`'s business; this module writes the
`checkpoints/` (the latest k saves, for resumption) and `best/` (the best save by the task's
validation metric: a separate manager, so "keep the best" never deletes the newest save).

Damage is never fatal while an intact checkpoint exists, and never silent: a checkpoint that
does not restore (a truncated or deleted file) is moved, untouched, to `damaged/` with a
warning naming it, and the run resumes from the newest one that restores; unfinished saves
(a save directory Orbax never committed, left by a kill mid-write) are moved there too. A save
that fails (a full disk) raises `CheckpointError` naming the step, while the earlier checkpoints
stay as they were: Orbax writes a save into a temporary directory and commits it by a rename.

A checkpoint of another run or model (see `transformer_jax.runs.identity`) is not damage:
restoring it raises `ForeignCheckpointError` and moves nothing.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint import path as ocp_path

from transformer_jax.nn.stacked import relayout, stacked_layout, to_layout
from transformer_jax.runs.identity import check_checkpoint
from transformer_jax.runs.layout import (
    CheckpointError,
    ForeignCheckpointError,
    RunIdentity,
    Workdir,
)

_UNREAD = object()


class Checkpoints:
    """The latest-k manager (for resumption) and the best-by-metric manager, saved together.

    With an `identity`, every save's meta carries its run id and model hash, and a checkpoint
    that carries others is refused on restore; without one (tools, tests) neither happens.
    """

    def __init__(
        self,
        workdir: Workdir,
        *,
        identity: RunIdentity | None = None,
        keep: int = 3,
        keep_best: int = 1,
        best_metric: str = "bleu",
        best_mode: str = "max",
    ):
        self.workdir = workdir
        self.identity = identity
        # The two managers save the same step when an evaluation falls on a checkpoint step,
        # and Orbax names its multi-process barriers after the step: without a prefix of their
        # own, the two saves' barriers share names, and the processes can pair them crosswise.
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            create=True,
            multiprocessing_options=ocp.options.MultiprocessingOptions(
                barrier_sync_key_prefix="latest"
            ),
        )
        self.latest = ocp.CheckpointManager(workdir.checkpoints, options=options)
        best_options = ocp.CheckpointManagerOptions(
            max_to_keep=keep_best,
            create=True,
            best_fn=lambda metrics: metrics[best_metric],
            best_mode=best_mode,
            multiprocessing_options=ocp.options.MultiprocessingOptions(
                barrier_sync_key_prefix="best"
            ),
        )
        self.best = ocp.CheckpointManager(workdir.best, options=best_options)
        self.best_metric = best_metric
        self.best_mode = best_mode
        self._best = _UNREAD  # (step, value) of best/'s save; see `best_saved`.
        self._pending = None  # The step of the last save submitted and not yet waited for.

    def _args(self, state, data_state: dict, meta: dict):
        if self.identity is not None:
            meta = {**meta, **self.identity.as_dict()}
        return ocp.args.Composite(
            state=ocp.args.StandardSave(state),
            data=ocp.args.JsonSave(data_state),
            meta=ocp.args.JsonSave(meta),
        )

    def save(self, step: int, state, data_state: dict, meta: dict, *, force: bool = False):
        """Asynchronous save of the full run at `step` (returns before the write finishes).

        Raises:
          CheckpointError: this save, or the previous one still being written, failed.
        """
        with self._failure(step if self._pending is None else f"{self._pending} or {step}"):
            self.latest.save(step, args=self._args(state, data_state, meta), force=force)
        self._pending = step

    def save_best(self, step: int, state, data_state: dict, meta: dict, value: float) -> bool:
        """Saves into best/ when `value` of the best metric is strictly better than the saved
        best's (or none is saved); returns whether it saved. A step already in best/ (a resumed
        run evaluating it again, to the same value) is not saved twice."""
        if not math.isfinite(value):
            return False
        saved = self.best_saved()
        if saved is not None:
            best_step, best_value = saved
            better = value > best_value if self.best_mode == "max" else value < best_value
            if step == best_step or not better or step in self.best.all_steps():
                return False
        metrics = {self.best_metric: value}
        with self._failure(f"{step} (best/)"):
            self.best.save(step, args=self._args(state, data_state, meta), metrics=metrics)
        self._best = step, float(value)
        return True

    def latest_step(self) -> int | None:
        return self.latest.latest_step()

    def best_saved(self) -> tuple[int, float] | None:
        """(step, value of the best metric) of the save in best/, or None if there is none.

        Read from disk once (Orbax writes a save's metrics when the asynchronous save ends),
        then kept up to date by `save_best`."""
        if self._best is _UNREAD:
            self._best = None
            step = self.best.best_step()
            metrics = (self.best.metrics(step) if step is not None else None) or {}
            if self.best_metric in metrics:
                self._best = step, float(metrics[self.best_metric])
        return self._best

    def restore(self, abstract_state, step: int | None = None) -> tuple[Any, dict, dict]:
        """(state, data_state, meta) of `step` (default: latest), arrays in their shardings.

        Raises:
          ForeignCheckpointError: the checkpoint is another run's or another model's (checked
            first, before any array is read).
        """
        step = self.latest.latest_step() if step is None else step
        if self.identity is not None:
            check_checkpoint(self.workdir, self.workdir.checkpoints / str(step), self.identity)
        # A run may switch `scan_layers` when it resumes: restore the layout that was saved.
        handler = ocp.PyTreeCheckpointHandler()
        try:
            state_dir = self.workdir.checkpoints / str(step) / "state"
            saved = stacked_layout(handler.metadata(state_dir).tree)
        finally:
            handler.close()
        target = abstract_state if saved is None else to_layout(abstract_state, saved)
        restored = self.latest.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(target),
                data=ocp.args.JsonRestore(),
                meta=ocp.args.JsonRestore(),
            ),
        )
        state = restored["state"]
        if jax.tree.structure(target) != jax.tree.structure(abstract_state):
            state = relayout(state, abstract_state)
        return state, dict(restored["data"]), dict(restored["meta"])

    def restore_intact(self, abstract_state) -> tuple[Any, dict, dict] | None:
        """(state, data_state, meta) of the newest checkpoint that restores, or None if none
        exists. Newer damaged ones are moved to `damaged/` with a warning (see the module doc).

        Raises:
          CheckpointError: checkpoints exist but none restores (nothing is moved).
          ForeignCheckpointError: a checkpoint met before an intact one (newest first) is
            another run's or another model's (nothing is moved: it is not damage).
        """
        self.set_aside_unfinished()
        steps = sorted(self.latest.all_steps(), reverse=True)
        failures = []
        for step in steps:
            try:
                restored = self.restore(abstract_state, step)
            except ForeignCheckpointError:
                raise
            except Exception as e:  # noqa: BLE001 - any damage: missing, truncated, garbled.
                failures.append((step, e))
                continue
            for bad, error in failures:
                where = self.set_aside(self.workdir.checkpoints / str(bad))
                logging.warning(
                    "checkpoint %s does not restore (%s: %s); moved to %s, untouched, and "
                    "resuming from step %d.",
                    self.workdir.checkpoints / str(bad),
                    type(error).__name__,
                    _first_line(error),
                    where,
                    step,
                )
            if failures:
                self.latest.reload()
            return restored
        if not failures:
            return None
        lines = "\n  ".join(
            f"{self.workdir.checkpoints / str(s)}: {type(e).__name__}: {_first_line(e)}"
            for s, e in failures
        )
        raise CheckpointError(
            f"none of the {len(failures)} checkpoints in {self.workdir.checkpoints} restores:\n  "
            f"{lines}\nNothing was changed. To start this run again from step 0, move "
            f"{self.workdir.checkpoints} away (or pass another --workdir)."
        )

    def set_aside_unfinished(self) -> list[str]:
        """Moves saves Orbax never committed (killed mid-write) to `damaged/`, with a warning."""
        moved = []
        for root in (self.workdir.checkpoints, self.workdir.best):
            if not root.exists():
                continue
            for path in sorted(root.iterdir()):
                if ocp_path.step.is_path_temporary(path):
                    where = self.set_aside(path)
                    logging.warning(
                        "unfinished checkpoint save %s (the run was stopped while writing it) "
                        "moved to %s; the checkpoints before it are intact.",
                        path,
                        where,
                    )
                    moved.append(str(where))
        if moved:
            self.latest.reload()
            self.best.reload()
        return moved

    def set_aside(self, path):
        """Moves `path` into `workdir/damaged/<its folder>/` (never deletes it); returns where.

        Process 0 moves; every process of a multi-process run waits for it.
        """
        target = self.workdir.path / "damaged" / path.parent.name / path.name
        if target.exists():
            target = target.parent / f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}"
        if jax.process_index() == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"set aside {path}")
        return target

    def wait(self):
        """Blocks until pending saves are written.

        Raises:
          CheckpointError: a pending save failed.
        """
        with self._failure(self._pending):
            self.latest.wait_until_finished()
            self.best.wait_until_finished()
        self._pending = None

    def _failure(self, step: int | str | None):
        return _SaveFailure(self, step)

    def close(self):
        self.latest.close()
        self.best.close()


def all_data_states(local: dict) -> dict:
    """The data-iterator state to checkpoint: this process's own state in a one-process run;
    in a multi-process run every process's (each reads its own shard), gathered to all, since
    Orbax writes the JSON items from the primary process only."""
    if jax.process_count() == 1:
        return local
    from jax.experimental import multihost_utils

    data = np.frombuffer(json.dumps(local).encode(), np.uint8)
    sizes = multihost_utils.process_allgather(np.int32(data.size))
    padded = np.zeros(int(np.max(sizes)), np.uint8)
    padded[: data.size] = data
    rows = multihost_utils.process_allgather(padded)
    states = [json.loads(bytes(row[:n]).decode()) for row, n in zip(rows, sizes, strict=True)]
    return {"per_process": states}


def local_data_state(saved: dict) -> dict:
    """This process's part of a state written by `all_data_states`.

    Raises:
      CheckpointError: the checkpoint was written by another number of processes.
    """
    if "per_process" not in saved:
        if jax.process_count() > 1:
            raise CheckpointError(
                f"this checkpoint was written by a one-process run; this run has "
                f"{jax.process_count()} processes, which read other shards of the data. Resume "
                f"it with one process, or start a new --workdir."
            )
        return saved
    states = saved["per_process"]
    if len(states) != jax.process_count():
        raise CheckpointError(
            f"this checkpoint was written by {len(states)} processes and this run has "
            f"{jax.process_count()}: each reads its own shard of the data, so the position in "
            f"it cannot be carried over. Resume with {len(states)} processes, or start a new "
            f"--workdir."
        )
    return states[jax.process_index()]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else ""


class _SaveFailure:
    """Turns an exception of an Orbax save (or of the asynchronous save before it) into a
    CheckpointError that says which checkpoints are intact and what to do."""

    def __init__(self, ckpt: Checkpoints, step: int | str | None):
        self.ckpt, self.step = ckpt, step

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is None or isinstance(error, (CheckpointError, KeyboardInterrupt)):
            return False
        which = f"step {self.step}" if self.step is not None else "a pending save"
        try:
            intact = sorted(self.ckpt.latest.all_steps())
        except Exception:  # noqa: BLE001 - the listing itself may fail on a broken disk.
            intact = "unknown"
        raise CheckpointError(
            f"saving {which} into {self.ckpt.workdir.checkpoints} failed: "
            f"{type(error).__name__}: {_first_line(error)}. The earlier checkpoints (steps "
            f"{intact}) are as they were. Free space or fix the storage, then rerun the same "
            f"command to resume from the newest of them."
        ) from error
