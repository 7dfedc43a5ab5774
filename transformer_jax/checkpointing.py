"""Orbax checkpoints of the whole run, the workdir's config guard, and preemption handling.

Layout of a workdir:
  config.json            the resolved config of the run (checked on every restart)
  tokenizer.model        the SentencePiece model (written by the data pipeline)
  checkpoints/<step>/    the latest k saves: train state, data-iterator state, metadata
  best/<step>/           the best save by validation BLEU (a separate manager, so "keep the best"
                         never deletes the newest save needed for resumption)
  metrics.jsonl, tensorboard/  logs
"""

from __future__ import annotations

import json
import logging
import pathlib
import signal
import threading
from typing import Any

import jax
import ml_collections
import orbax.checkpoint as ocp

# Config fields that fix the parameters' shapes or the meaning of token ids: a workdir trained
# with other values cannot be resumed with these.
_MODEL_DEFINING_DATA_FIELDS = (
    "vocab_size",
    "spm_model_type",
    "spm_model_path",
    "source",
    "tfds_name",
    "source_lang",
    "target_lang",
    "embedded_target_lang",
)


def config_conflicts(saved: dict, new: dict) -> list[str]:
    """Lines `field: saved -> new` for every model-defining field that differs."""
    diffs = []
    for key in sorted(set(saved.get("model", {})) | set(new.get("model", {}))):
        a, b = saved.get("model", {}).get(key), new.get("model", {}).get(key)
        if a != b:
            diffs.append(f"model.{key}: {a!r} -> {b!r}")
    for key in _MODEL_DEFINING_DATA_FIELDS:
        a, b = saved.get("data", {}).get(key), new.get("data", {}).get(key)
        if a != b:
            diffs.append(f"data.{key}: {a!r} -> {b!r}")
    return diffs


def check_or_write_config(workdir: pathlib.Path, config: ml_collections.ConfigDict) -> None:
    """Write `config.json`, or refuse a config that conflicts with the one already there."""
    path = workdir / "config.json"
    new = json.loads(config.to_json_best_effort())
    if path.exists():
        saved = json.loads(path.read_text())
        diffs = config_conflicts(saved, new)
        if diffs:
            raise ValueError(
                f"{workdir} holds a run whose model or vocabulary differs from this config:\n  "
                + "\n  ".join(diffs)
                + "\nUse a new --workdir, or the same settings to resume the run."
            )
    if jax.process_index() == 0:
        workdir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(new, indent=2, sort_keys=True))
        tmp.replace(path)


class Checkpoints:
    """The latest-k manager (for resumption) and the best-by-BLEU manager, saved together."""

    def __init__(self, workdir: pathlib.Path, *, keep: int = 3, keep_best: int = 1):
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True)
        self.latest = ocp.CheckpointManager(workdir / "checkpoints", options=options)
        best_options = ocp.CheckpointManagerOptions(
            max_to_keep=keep_best,
            create=True,
            best_fn=lambda metrics: metrics["bleu"],
            best_mode="max",
        )
        self.best = ocp.CheckpointManager(workdir / "best", options=best_options)

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

    def save_best(self, step: int, state, data_state: dict, meta: dict, bleu: float):
        self.best.save(step, args=self._args(state, data_state, meta), metrics={"bleu": bleu})

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


def abstract_with_shardings(abstract_state, shardings):
    """ShapeDtypeStructs carrying concrete NamedShardings: the target Orbax restores into."""
    return jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), abstract_state, shardings
    )


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
