"""Which host this is, and the workdir, as every input pipeline takes them."""

from __future__ import annotations

import os

from transformer_jax.runs.layout import Workdir

WorkdirLike = Workdir | str | os.PathLike


def resolve_processes(process_index: int | None, process_count: int | None) -> tuple[int, int]:
    """(process_index, process_count), asking JAX for the ones left None; validated."""
    if process_index is None or process_count is None:
        import jax  # Only when the caller leaves it to JAX: the pipelines do not need it.

        process_index = jax.process_index() if process_index is None else process_index
        process_count = jax.process_count() if process_count is None else process_count
    if not (isinstance(process_count, int) and process_count >= 1):
        raise ValueError(f"process_count must be an integer >= 1, got {process_count!r}.")
    if not (isinstance(process_index, int) and 0 <= process_index < process_count):
        raise ValueError(f"process_index={process_index!r} not in [0, {process_count}).")
    return process_index, process_count


def as_workdir(workdir: WorkdirLike) -> Workdir:
    """A `Workdir` from a path (local or gs://) or a `Workdir`."""
    return workdir if isinstance(workdir, Workdir) else Workdir.at(workdir)
