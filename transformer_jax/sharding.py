"""Device mesh and logical axis rules: the one place that decides how arrays are split.

Parameters carry logical axis names (`embed`, `heads`, `kv`, `mlp`, `vocab`); batches have a
`batch` axis. `LOGICAL_RULES` maps each name to mesh axes of a `("data", "fsdp", "tensor")` mesh:

- data parallel (the default): mesh `data=all devices`; parameters are replicated.
- FSDP: `fsdp>1` shards every parameter's `embed` axis (and the batch) over that axis.
- tensor parallel: `tensor>1` shards heads, feed-forward width and vocabulary (Megatron style).

A dimension that a mesh axis does not divide is left unsharded rather than failing (training);
`undivided` lists such dimensions, which serving refuses (`transformer_jax.serving_mesh`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")
BATCH_AXES = ("data", "fsdp")

LOGICAL_RULES: dict[str, tuple[str, ...]] = {
    "batch": BATCH_AXES,
    "embed": ("fsdp",),
    "heads": ("tensor",),
    "mlp": ("tensor",),
    "vocab": ("tensor",),
    "kv": (),
    "layers": (),  # The layer axis of stacked parameters (`nn.stacked`): every device has all.
}


def mesh_sizes(shape: Mapping[str, Any], num_devices: int) -> tuple[int, ...]:
    """The size of each of `MESH_AXES` for a mesh `shape` over `num_devices` devices.

    Args:
      shape: sizes per axis name (missing axes are 1), as a config gives them (checked); one
        axis may be -1 meaning "all remaining devices".
      num_devices: how many devices the mesh spans.

    Raises:
      ValueError: an unknown axis, a size that is not a positive integer or -1, two -1s, or
        sizes whose product does not match the devices.
    """
    unknown = set(shape) - set(MESH_AXES)
    if unknown:
        raise ValueError(f"mesh axes {sorted(unknown)} are not among {MESH_AXES}.")
    for name, size in shape.items():
        if isinstance(size, bool) or not isinstance(size, int) or not (size >= 1 or size == -1):
            raise ValueError(
                f"mesh axis {name!r} has size {size!r}: use a positive integer, or -1 for all "
                f"remaining devices."
            )
    sizes = [shape.get(name, 1) for name in MESH_AXES]
    if sizes.count(-1) > 1:
        raise ValueError(f"at most one mesh axis may be -1, got {dict(shape)}.")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if num_devices % known:
            raise ValueError(
                f"mesh {dict(shape)}: {num_devices} devices are not divisible by {known}."
            )
        sizes[sizes.index(-1)] = num_devices // known
    if math.prod(sizes) != num_devices:
        raise ValueError(
            f"mesh {dict(zip(MESH_AXES, sizes, strict=True))} needs {math.prod(sizes)} "
            f"devices but {num_devices} are available; set one axis to -1 to use them all."
        )
    return tuple(sizes)


def make_mesh(shape: Mapping[str, int], devices=None) -> Mesh:
    """A `("data", "fsdp", "tensor")` mesh with Auto axis types (GSPMD propagation).

    Args:
      shape: sizes per axis name; one axis may be -1 meaning "all remaining devices".
      devices: defaults to `jax.devices()` (every device of every process).

    Raises:
      ValueError: see `mesh_sizes`.
    """
    devices = list(jax.devices() if devices is None else devices)
    sizes = mesh_sizes(shape, len(devices))
    auto = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)
    return jax.make_mesh(sizes, MESH_AXES, axis_types=auto, devices=devices)


def _dimension_axes(
    logical_axes: tuple[str | None, ...],
    shape: tuple[int, ...],
    mesh: Mesh,
    rules: Mapping[str, tuple[str, ...]],
) -> list[tuple[tuple[str, ...], int]]:
    """Per dimension: (the mesh axes the rules would split it over, their total size).

    A mesh axis of size 1, or one an earlier dimension took, is not offered again. A dimension
    that the size does not divide takes no axis (the next dimension may have them).
    """
    used: set[str] = set()
    out = []
    for name, dim in zip(logical_axes, shape, strict=True):
        axes = tuple(a for a in rules.get(name, ()) if a not in used and mesh.shape[a] > 1)
        size = math.prod(mesh.shape[a] for a in axes)
        if axes and dim % size == 0:
            used.update(axes)
        out.append((axes, size))
    return out


def logical_to_spec(
    logical_axes: tuple[str | None, ...] | None,
    shape: tuple[int, ...],
    mesh: Mesh,
    rules: Mapping[str, tuple[str, ...]] = LOGICAL_RULES,
) -> PartitionSpec:
    """PartitionSpec for an array of `shape` with the given logical axis names.

    A mesh axis is used at most once per array, and only where it divides the dimension.
    """
    if not logical_axes:
        return PartitionSpec()
    spec = []
    for (axes, size), dim in zip(
        _dimension_axes(logical_axes, shape, mesh, rules), shape, strict=True
    ):
        if not axes or dim % size:
            spec.append(None)
        else:
            spec.append(axes[0] if len(axes) == 1 else axes)
    return PartitionSpec(*spec)


def undivided(params, mesh: Mesh, rules=LOGICAL_RULES) -> list[tuple[str, str, int, str, int]]:
    """Where the rules would split a parameter's dimension but the mesh does not divide it
    (`logical_to_spec` then leaves that dimension whole on every device).

    Returns:
      (parameter path, logical axis name, dimension size, mesh axes as "a*b", their size) for
      each such dimension, in tree order.
    """
    out = []
    leaves = jax.tree_util.tree_flatten_with_path(
        params, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )[0]
    for path, variable in leaves:
        axes = variable.get_metadata().get("logical_axes") or ()
        shape = tuple(variable.shape)
        for name, dim, (mesh_axes, size) in zip(
            axes, shape, _dimension_axes(axes, shape, mesh, rules), strict=True
        ):
            if mesh_axes and dim % size:
                where = "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)
                out.append((where, name, dim, "*".join(mesh_axes), size))
    return out


def param_shardings(params, mesh: Mesh, rules=LOGICAL_RULES):
    """NamedShardings for an (abstract) parameter state, from each Param's `logical_axes`."""

    def one(variable):
        axes = variable.get_metadata().get("logical_axes")
        spec = logical_to_spec(axes, tuple(variable.shape), mesh, rules)
        return variable.replace(NamedSharding(mesh, spec))

    return jax.tree.map(one, params, is_leaf=lambda x: isinstance(x, nnx.Variable))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) axis split over data and fsdp; everything else whole."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def place_batch(x: np.ndarray, mesh: Mesh) -> jax.Array:
    """A batch that every process holds whole, as one global array on `mesh`: its leading axis
    split over the mesh's batch axes when they divide it, else replicated.

    Each process keeps only the rows its own devices hold (`global_shape` = the local shape).
    """
    return jax.make_array_from_process_local_data(rows_sharding(x.shape[0], mesh), x, x.shape)


def rows_sharding(rows: int, mesh: Mesh) -> NamedSharding:
    """How `place_batch` places `rows` rows: split over the mesh's batch axes when they divide
    them, else replicated."""
    axes = tuple(a for a in BATCH_AXES if a in mesh.axis_names and mesh.shape[a] > 1)
    split = bool(axes) and rows % math.prod(mesh.shape[a] for a in axes) == 0
    return NamedSharding(mesh, PartitionSpec(axes) if split else PartitionSpec())


def abstract_input(shape: tuple[int, ...], dtype, mesh: Mesh) -> jax.ShapeDtypeStruct:
    """The shape, dtype and sharding of a serving input as `place_batch` would place it (for
    compiling ahead of time)."""
    return jax.ShapeDtypeStruct(shape, dtype, sharding=rows_sharding(shape[0], mesh))


def to_host(x) -> np.ndarray:
    """The whole value of an array as numpy, on every process: a global array whose shards
    live on other processes' devices too (a batch split over a multi-host mesh) is gathered."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(jax.device_get(x))


def constrain_batch(x: jax.Array) -> jax.Array:
    """Pin an activation's leading axis to the batch mesh axes when a mesh is set.

    Under `jax.set_mesh(mesh)` this keeps GSPMD from re-sharding activations along the model
    dimension (which FSDP parameters would otherwise invite); with no mesh it does nothing.
    """
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or not set(BATCH_AXES) <= set(mesh.axis_names):
        return x
    size = int(np.prod([mesh.shape[a] for a in BATCH_AXES]))
    if size == 1 or x.shape[0] % size:
        return x
    spec = PartitionSpec(BATCH_AXES, *([None] * (x.ndim - 1)))
    return jax.lax.with_sharding_constraint(x, spec)


def target_platform() -> str:
    """The platform the program being traced runs on: "cpu", "gpu" or "tpu".

    The devices of the mesh set with `jax.set_mesh` decide, not the host's default backend:
    a program compiled ahead of time for TPU or GPU devices on a CPU host (`transformer_jax
    compile`) must make the choices of its target. Without a mesh it is the default backend.
    Every backend-dependent choice of a model (attention kernel, gradient barrier) reads this.
    """
    mesh = jax.sharding.get_abstract_mesh()
    device = None if mesh.empty else getattr(mesh, "abstract_device", None)
    platform = jax.default_backend() if device is None else device.platform
    return "gpu" if platform in ("cuda", "rocm") else platform


def under_mesh(jitted, mesh: Mesh):
    """Call (and so trace) `jitted` with `mesh` set, so activation constraints see the mesh."""

    @functools.wraps(jitted)
    def call(*args):
        with jax.set_mesh(mesh):
            return jitted(*args)

    call.jitted = jitted  # for `.lower(...)` and compile counting
    return call
