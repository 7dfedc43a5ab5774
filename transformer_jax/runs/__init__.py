"""The run contract: what a workdir holds, and the one place that writes, checks and reads it.

  layout       the paths of a workdir and its JSON files (config, model, run identity);
               errors `CheckpointError`, `ForeignCheckpointError`
  identity     the model hash and run id every checkpoint repeats; refusing another run's
  lock         one training process per workdir (`WorkdirLock`)
  checkpoints  writing and restoring a training run's Orbax checkpoints (`Checkpoints`)
  reading      the saved steps, a step's parameters restored into their shards, averaging
  tokenizer    which tokenizer a run uses: one rule for every task, at training and serving
  metrics      the rows of its metrics.jsonl, by split (`read_metrics`)
  load         `load_run(workdir, step=, average_last=, mesh=, expect=)`: config, model,
               tokenizer and steps, as every front end, `evaluate`, `init_from` and interop
               load a run

    from transformer_jax.runs import load_run
    run = load_run("runs/default", average_last=5)
    run.model, run.tokenizer, run.steps

The input pipelines read `layout` and `tokenizer` only, so importing a pipeline does not load
the models: the names below load their module on first use.
"""

import importlib
from typing import no_type_check

_HOMES = {
    "CheckpointError": "layout",
    "ForeignCheckpointError": "layout",
    "RunIdentity": "layout",
    "Workdir": "layout",
    "model_hash": "identity",
    "check_checkpoint": "identity",
    "WorkdirLock": "lock",
    "WorkdirBusyError": "lock",
    "Checkpoints": "checkpoints",
    "checkpoint_steps": "reading",
    "select_steps": "reading",
    "average_params": "reading",
    "load_tokenizer": "tokenizer",
    "read_metrics": "metrics",
    "Expect": "load",
    "Run": "load",
    "load_run": "load",
    "open_run": "load",
}


@no_type_check  # No checking frame from the tests' jaxtyping hook (see deprecation.py).
def __getattr__(name: str) -> object:
    """A name of the contract, imported from its module on first use."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = sorted(_HOMES)
