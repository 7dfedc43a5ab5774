"""Serving on a device mesh: which mesh, and whether the model fits it.

Every front end (`Translator`, `Generator`, `Classifier`, `MaskFiller`, `ImageClassifier`) takes
`mesh=`; `loading.load_model(..., mesh=)` then restores each parameter straight into the shard
that training would give it (`sharding.param_shardings`, from its logical axes), so no device
ever holds the whole model. A mesh is given as

- a mapping of axis sizes, `{"fsdp": 4, "tensor": 2}` (the axes of `config.mesh`);
- its text form, what the command lines' `--mesh` flag takes: `"fsdp=4,tensor=2"`;
- or a `jax.sharding.Mesh` with the axes `("data", "fsdp", "tensor")` (e.g. training's).

Axes not given are 1, except `data`, which takes the devices the others leave (as
`config.mesh`'s default `data=-1` does) unless another axis is -1. Batches are split over
data and fsdp. Training quietly leaves a dimension whole where its mesh axis does not divide
it; serving refuses such a mesh (`check_fits`), since the point of the mesh is memory.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping

import jax
import numpy as np
from jax.sharding import Mesh

from transformer_jax import sharding as shd

MeshLike = Mesh | Mapping[str, int] | str
# Dimensions that may stay whole: the vocabulary's size comes from the tokenizer, not from a
# choice of model sizes, and no tensor size may divide it.
MAY_STAY_WHOLE = ("vocab",)
FLAG_HELP = (
    "Serve on a device mesh: axis sizes as 'fsdp=4,tensor=2' (axes data, fsdp, tensor; one may "
    "be -1 for the rest; data takes the devices the others leave). Parameters are restored "
    "already sharded. Default: replicated on this host's devices."
)
_ITEM = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(-?\d+)\s*$")


class MeshError(ValueError):
    """A mesh that does not fit the devices or the model; the message says what to change."""


def parse_mesh(text: str) -> dict[str, int]:
    """`"fsdp=4,tensor=2"` -> `{"fsdp": 4, "tensor": 2}`.

    Raises:
      MeshError: not comma-separated `axis=size` items, or an axis named twice.
    """
    shape: dict[str, int] = {}
    for item in text.split(","):
        match = _ITEM.match(item)
        if not match:
            raise MeshError(
                f"mesh {text!r}: {item.strip()!r} is not axis=size; write e.g. "
                f"'fsdp=4,tensor=2' (axes {', '.join(shd.MESH_AXES)})."
            )
        name, size = match.group(1), int(match.group(2))
        if name in shape:
            raise MeshError(f"mesh {text!r}: axis {name!r} is given twice.")
        shape[name] = size
    return shape


def serving_mesh(mesh: MeshLike | None, devices=None) -> Mesh | None:
    """The `("data", "fsdp", "tensor")` mesh that `mesh` describes (None stays None).

    Args:
      mesh: see the module docstring.
      devices: defaults to `jax.devices()` (every device of every process).

    Raises:
      MeshError: an unknown axis, a bad size, or sizes whose product is not the device count.
    """
    if mesh is None or isinstance(mesh, Mesh):
        if mesh is not None and not set(shd.MESH_AXES) <= set(mesh.axis_names):
            raise MeshError(
                f"mesh axes {mesh.axis_names} lack some of {shd.MESH_AXES}; build the mesh with "
                f"transformer_jax.sharding.make_mesh, or pass axis sizes instead."
            )
        return mesh
    shape = parse_mesh(mesh) if isinstance(mesh, str) else dict(mesh)
    if "data" not in shape and -1 not in shape.values():
        shape["data"] = -1
    try:
        return shd.make_mesh(shape, devices)
    except ValueError as e:
        raise MeshError(str(e)) from None


def check_fits(abstract_params, mesh: Mesh) -> None:
    """Raises unless every mesh axis divides the model dimensions it is meant to split.

    Raises:
      MeshError: naming each axis, the dimension it does not divide, and a parameter there.
    """
    seen: dict[tuple[str, int, str, int], str] = {}
    for path, name, dim, axes, size in shd.undivided(abstract_params, mesh):
        if name not in MAY_STAY_WHOLE:
            seen.setdefault((name, dim, axes, size), path)
    if seen:
        problems = "; ".join(
            f"{axes}={size} does not divide {name} of size {dim} (e.g. {path})"
            for (name, dim, axes, size), path in seen.items()
        )
        raise MeshError(
            f"mesh {dict(mesh.shape)} does not fit the model: {problems}. Those parameters "
            f"would sit whole on every device; choose axis sizes that divide them (the model's "
            f"sizes are in the workdir's model.json), e.g. a smaller tensor axis."
        )


def on_mesh(mesh: Mesh | None, *batches: np.ndarray) -> tuple:
    """The batches as global arrays on `mesh`, rows split over data and fsdp (see
    `sharding.place_batch`); unchanged without a mesh."""
    return batches if mesh is None else tuple(shd.place_batch(b, mesh) for b in batches)


def under(mesh: Mesh | None):
    """`jax.set_mesh(mesh)` (activations keep the batch split), or nothing without a mesh."""
    return contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh)
