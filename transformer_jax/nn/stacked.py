"""Layer-stacked parameters: a `Stack` with `scan_layers` stores its blocks as one block whose
every parameter has a leading layer axis, so XLA compiles one block and the optimizer updates
one array per parameter, whatever the depth.

The two layouts of a state tree differ only under each stack's `layers` entry:

    per layer: .../layers/0/ffn/w1 [D, F], .../layers/1/ffn/w1 [D, F], ...
    stacked:   .../layers/ffn/w1 [L, D, F], logical axes ("layers", "embed", "mlp")

`to_layout` converts any tree holding `nnx.State`s (parameters, Adam's moments, a train state,
their abstract shapes with shardings) from one layout to the other, which is how a checkpoint
saved in one layout restores into a model built in the other.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

LAYERS = "layers"  # The attribute of a Stack that holds its blocks, and their logical axis.


def stack_modules(modules: Sequence[nnx.Module]) -> nnx.Module:
    """One module of the same structure whose every variable is the stack of the modules'."""
    states = [nnx.state(m) for m in modules]
    stacked = jax.tree.map(_stack, *states, is_leaf=_is_variable)
    return nnx.merge(nnx.graphdef(modules[0]), stacked)


def layer_view(stacked: nnx.Module, i: int) -> nnx.Module:
    """Layer `i` of a module built by `stack_modules`, as a module of its own (arrays sliced)."""
    graphdef, state = nnx.split(stacked)
    return nnx.merge(graphdef, jax.tree.map(lambda a: a[i], state))


def to_layout(tree, stacked: bool):
    """`tree` with every `nnx.State` in it in the stacked (or per-layer) layout.

    Leaves may be arrays or `jax.ShapeDtypeStruct`s (restore targets: a stacked leaf's
    sharding gets an unsplit leading axis). Parts already in the layout are returned as they are.
    """
    convert = _stack_state if stacked else _unstack_state
    return jax.tree.map(
        lambda x: convert(x) if isinstance(x, nnx.State) else x,
        tree,
        is_leaf=lambda x: isinstance(x, nnx.State),
    )


def stacked_layout(tree) -> bool | None:
    """Whether `tree` (a state, its abstract shapes, or the metadata tree of a checkpoint) is
    in the stacked layout; None when it has no stack with layers (both layouts are the same)."""
    for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        keys = [str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k)))) for k in path]
        for j, key in enumerate(keys[:-1]):
            if key == LAYERS:
                return not keys[j + 1].isdigit()
    return None


def relayout(tree, like):
    """`tree`'s values in the layout and the shardings of `like` (ShapeDtypeStructs with
    shardings, e.g. a restore target). (Not donated: no buffer of one layout has the shape of
    one of the other's.)"""
    shardings = jax.tree.map(lambda x: x.sharding, like)
    convert = functools.partial(to_layout, stacked=bool(stacked_layout(like)))
    return jax.jit(convert, out_shardings=shardings)(tree)


# --------------------------------------------------------------------------------- internals
def _is_variable(x) -> bool:
    return isinstance(x, nnx.Variable)


def _layer_position(path: tuple) -> int | None:
    """Where `layers/<int>` starts in a per-layer path."""
    for j in range(len(path) - 1):
        if path[j] == LAYERS and isinstance(path[j + 1], int):
            return j
    return None


def _stacked_position(path: tuple) -> int | None:
    """Where `layers` is in a stacked path (followed by a name, not a layer number)."""
    for j in range(len(path) - 1):
        if path[j] == LAYERS and not isinstance(path[j + 1], int):
            return j
    return None


def _stack_state(state: nnx.State) -> nnx.State:
    flat, groups = {}, {}
    for path, leaf in state.flat_state():
        j = _layer_position(path)
        if j is None:
            flat[path] = leaf
        else:
            groups.setdefault(path[: j + 1] + path[j + 2 :], {})[path[j + 1]] = leaf
    for path, layers in groups.items():
        flat[path] = _stack(*(layers[i] for i in range(len(layers))))
    return nnx.State.from_flat_path(flat)


def _unstack_state(state: nnx.State) -> nnx.State:
    flat = {}
    for path, leaf in state.flat_state():
        j = _stacked_position(path)
        if j is None:
            flat[path] = leaf
            continue
        for i in range(_value(leaf).shape[0]):
            flat[path[: j + 1] + (i,) + path[j + 1 :]] = _slice(leaf, i)
    return nnx.State.from_flat_path(flat)


def _value(leaf):
    return leaf.get_value() if _is_variable(leaf) else leaf


def _stack(*leaves):
    """Variables (or arrays, or ShapeDtypeStructs) of equal shapes -> one with a layer axis."""
    values = [_value(v) for v in leaves]
    first = values[0]
    if isinstance(first, jax.ShapeDtypeStruct):
        sharding = first.sharding
        if isinstance(sharding, NamedSharding):
            spec = PartitionSpec(None, *sharding.spec, *(None,) * (first.ndim - len(sharding.spec)))
            sharding = NamedSharding(sharding.mesh, spec)
        value = jax.ShapeDtypeStruct((len(values), *first.shape), first.dtype, sharding=sharding)
    else:
        value = jnp.stack(values)
    if not _is_variable(leaves[0]):
        return value
    axes = leaves[0].get_metadata().get("logical_axes")
    if axes is None:
        return leaves[0].replace(value)
    return leaves[0].replace(value, logical_axes=(LAYERS, *axes))


def _slice(leaf, i: int):
    """Layer `i` of a stacked Variable (or array, or ShapeDtypeStruct)."""
    value = _value(leaf)
    if isinstance(value, jax.ShapeDtypeStruct):
        sharding = value.sharding
        if isinstance(sharding, NamedSharding):
            sharding = NamedSharding(sharding.mesh, PartitionSpec(*sharding.spec[1:]))
        value = jax.ShapeDtypeStruct(value.shape[1:], value.dtype, sharding=sharding)
    else:
        value = value[i]
    if not _is_variable(leaf):
        return value
    axes = leaf.get_metadata().get("logical_axes")
    if axes is None or not axes or axes[0] != LAYERS:
        return leaf.replace(value)
    return leaf.replace(value, logical_axes=tuple(axes[1:]))
