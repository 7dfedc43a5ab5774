"""The programs of a training config, lowered from shapes alone for any mesh: the train step,
the eval step and the task's inference programs (decoding, classifiers' forward).

Nothing is allocated and no data is read: the state is `ShapeDtypeStruct`s carrying the
mesh's shardings, the batches are the task's `batch_spec`, and the model fields the data
decides come from `abstract_data_values` (upper bounds such as the vocabulary size).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import ml_collections
from jax.sharding import Mesh

from transformer_jax import models
from transformer_jax import sharding as shd
from transformer_jax.nn.attention import resolve_kernel
from transformer_jax.rng import dropout_key_spec
from transformer_jax.training.programs import build_programs
from transformer_jax.training.validation import check_batch_split, validate_train_config


@dataclasses.dataclass(frozen=True)
class Program:
    """One program to compile.

    Attributes:
      name: what it is ("train step", "greedy decoding", ...).
      lower: lowers it (under the mesh) for the compiler.
      items: tokens (or images, rows) one call processes, for FLOPs per item; 0 if none.
      unit: what `items` counts ("token", "image", "row").
    """

    name: str
    lower: Callable[[], jax.stages.Lowered]
    items: int
    unit: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """A config's model and state on a mesh, and its programs."""

    mesh: Mesh
    model_cfg: Any
    kernel: str  # The attention implementation the model resolves to on the mesh's devices.
    param_count: int
    param_bytes: int  # Per device (the largest shard of each parameter, summed).
    optimizer_bytes: int  # Per device.
    programs: list[Program]


def shard_bytes(tree) -> int:
    """Bytes one device holds of a tree of ShapeDtypeStructs with shardings (the largest shard
    of each leaf: devices hold equal shards, or replicas)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        shape = leaf.sharding.shard_shape(leaf.shape) if leaf.sharding is not None else leaf.shape
        total += math.prod(shape) * leaf.dtype.itemsize
    return total


def batch_items(spec: dict[str, jax.ShapeDtypeStruct]) -> tuple[int, str]:
    """(tokens per batch, "token") for text, (images, "image") for images: counted on the
    largest integer array of rank 2 (tokens), else the rows of a rank-4 array (images)."""
    tokens = [math.prod(s.shape) for s in spec.values() if s.ndim == 2 and s.dtype.kind in "iu"]
    if tokens:
        return max(tokens), "token"
    images = [s.shape[0] for s in spec.values() if s.ndim == 4]
    return (images[0], "image") if images else (0, "row")


def with_batch_sharding(spec: dict[str, jax.ShapeDtypeStruct], mesh: Mesh) -> dict:
    """The spec's arrays split along their rows over the mesh's batch axes."""
    sharding = shd.batch_sharding(mesh)
    return {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding) for k, v in spec.items()}


def plan(config: ml_collections.ConfigDict, mesh: Mesh, *, inference: bool = True) -> Plan:
    """The programs of `config` (a training config, checked) on `mesh`, ready to lower.

    Raises:
      ValueError: a config the training loop would refuse (naming the field).
    """
    # The mesh is checked against the target's devices (`targets.target_mesh`), not this host's.
    host_mesh = copy.deepcopy(config)
    host_mesh.mesh = ml_collections.ConfigDict({"data": -1, "fsdp": 1, "tensor": 1})
    with jax.set_mesh(mesh):  # The target's platform decides which attention kernels apply.
        task_cls = validate_train_config(host_mesh)
    check_batch_split(config, mesh.size)
    config = task_cls.resolve_config(config)
    task = task_cls.without_data(config)
    try:
        data_values = task_cls.abstract_data_values(config)
        train_batch = task_cls.batch_spec(config, "train")
        eval_batch = task_cls.batch_spec(config, "eval")
    except NotImplementedError as e:  # A task defined outside the package may not say.
        raise ValueError(
            f"{e} Compiling ahead of time needs both: define them on the task class."
        ) from None
    model_cfg = models.build_config(config.model, data_values)
    built, state = build_programs(config, model_cfg, task, mesh, abstract=True)
    graphdef, train_fn, eval_fn = built.graphdef, built.train_fn, built.eval_fn
    _check_rows(train_batch, mesh, "train")
    rng = dropout_key_spec(config.get("rng_impl", "threefry"), shd.replicated(mesh))

    def under(lower):
        def run():
            with jax.set_mesh(mesh):
                return lower()

        return run

    programs = [
        Program(
            "train step",
            under(
                lambda: train_fn.jitted.lower(state, with_batch_sharding(train_batch, mesh), rng)
            ),
            *batch_items(train_batch),
        ),
        Program(
            "eval step",
            under(
                lambda: eval_fn.jitted.lower(state.params, with_batch_sharding(eval_batch, mesh))
            ),
            *batch_items(eval_batch),
        ),
    ]
    if inference:
        for name, (lower, items, unit) in task.inference_programs(
            graphdef, state.params, mesh
        ).items():
            programs.append(Program(name, under(lower), items, unit))
    with jax.set_mesh(mesh):
        kernel = resolve_kernel(model_cfg.attention_kernel, model_cfg.dtype)
    return Plan(
        mesh=mesh,
        model_cfg=model_cfg,
        kernel=kernel,
        param_count=sum(math.prod(x.shape) for x in jax.tree.leaves(state.params)),
        param_bytes=shard_bytes(state.params),
        optimizer_bytes=shard_bytes(state.opt_state),
        programs=programs,
    )


def _check_rows(spec: dict[str, jax.ShapeDtypeStruct], mesh: Mesh, split: str) -> None:
    """Raises when the mesh's batch axes do not divide the batch's rows."""
    rows = next(iter(spec.values())).shape[0]
    size = math.prod(mesh.shape[a] for a in shd.BATCH_AXES)
    if rows % size:
        raise ValueError(
            f"the {split} batch has {rows} rows, which the mesh's data x fsdp = {size} devices "
            "do not divide: change config.data.batch_multiple (or the batch size) or the mesh."
        )
