"""Metric sums of a whole split, for a task's final test or an `evaluate` run.

The loop's own eval step covers validation during training; this scores any list of batches
with the task's loss function and a model, outside the loop (one compile per model and shape).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from transformer_jax import sharding as shd


@functools.partial(jax.jit, static_argnums=(0, 1))
def _sums(loss_fn: Callable, graphdef, params, batch):
    return loss_fn(nnx.merge(graphdef, params), batch, None, True)[1]


def split_sums(
    loss_fn: Callable, model: nnx.Module, batches: Sequence[dict], mesh: Mesh
) -> dict[str, Any] | None:
    """The task's metric sums over every batch (host-local rows, global sums) on the host;
    None for no batches. `loss_fn` must be hashable and stable (a task's bound method)."""
    graphdef, params = nnx.split(model)
    sharding, total = shd.batch_sharding(mesh), None
    for batch in batches:
        batch = {k: jax.make_array_from_process_local_data(sharding, v) for k, v in batch.items()}
        with jax.set_mesh(mesh):
            sums = jax.device_get(_sums(loss_fn, graphdef, params, batch))
        total = sums if total is None else jax.tree.map(np.add, total, sums)
    return total
