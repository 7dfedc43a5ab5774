"""Checked access to a checkpoint's tensors by name, and the project's parameter tree by path.

`Source` hands out a checkpoint's tensors, each checked against the shape the model config
implies, and remembers which it handed out, so a conversion can name what it left unused.
`fill_params` puts a flat `{"decoder/layers/0/ffn/w1": array}` mapping into a model's abstract
parameter tree, and `flat_params` reads one back.
"""

from __future__ import annotations

from collections.abc import Iterable

import jax
import numpy as np

from transformer_jax.interop.files import ConversionError


class Source:
    """The tensors of one checkpoint, read by name with their expected shapes.

    Attributes:
      where: the folder (for messages).
      prefixes: name prefixes tried in order, e.g. ("transformer.", "") for GPT-2 saved as a
        language model or as the bare `GPT2Model`.
    """

    def __init__(self, tensors: dict[str, np.ndarray], where: str, prefixes: Iterable[str] = ("",)):
        self.tensors = tensors
        self.where = where
        self.prefixes = tuple(prefixes)
        self.used: set[str] = set()

    def name(self, name: str) -> str | None:
        """The stored name of `name` under the first prefix that has it, else None."""
        for prefix in self.prefixes:
            if prefix + name in self.tensors:
                return prefix + name
        return None

    def has(self, name: str) -> bool:
        return self.name(name) is not None

    def get(self, name: str, shape: tuple[int, ...], *alternatives: str) -> np.ndarray:
        """Tensor `name` (or the first of `alternatives` present) as float32, of `shape`.

        Raises:
          ConversionError: missing, or of another shape than the config implies.
        """
        for candidate in (name, *alternatives):
            stored = self.name(candidate)
            if stored is not None:
                break
        else:
            raise ConversionError(
                f"{self.where}: tensor {self.prefixes[0]}{name} is missing from the "
                f"checkpoint (config.json describes a model that has it). Use the "
                f"model.safetensors written with this config.json."
            )
        value = self.tensors[stored]
        if tuple(value.shape) != tuple(shape):
            raise ConversionError(
                f"{self.where}: tensor {stored} has shape {tuple(value.shape)}, but config.json "
                f"implies {tuple(shape)}. The weights and config.json are of different models."
            )
        self.used.add(stored)
        return np.asarray(value, np.float32)

    def unused(self, ignore: Iterable[str] = ()) -> list[str]:
        """Names never read, but those ending in one of `ignore` (buffers such as masks)."""
        ignore = tuple(ignore)
        return sorted(n for n in self.tensors if n not in self.used and not n.endswith(ignore))


def _key(entry) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def _path(path) -> str:
    """ "decoder/layers/0/ffn/w1" for the tree path of a parameter (without the `value` leaf)."""
    names = [_key(k) for k in path]
    return "/".join(names[:-1] if names and names[-1] == "value" else names)


def flat_params(params) -> dict[str, np.ndarray]:
    """`{"decoder/layers/0/ffn/w1": array}` for every parameter of an nnx State (numpy)."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    return {_path(path): np.asarray(leaf) for path, leaf in leaves}


def fill_params(abstract, values: dict[str, np.ndarray], where: str):
    """The parameter tree of `abstract` (an nnx State of ShapeDtypeStructs) with `values`.

    Raises:
      ConversionError: a parameter has no value or one of another shape (a bug of a mapping,
        named), or a value names no parameter.
    """
    leaves, treedef = jax.tree_util.tree_flatten_with_path(abstract)
    wanted = {_path(path): leaf for path, leaf in leaves}
    missing = sorted(set(wanted) - set(values))
    extra = sorted(set(values) - set(wanted))
    wrong = sorted(
        f"{k}: {tuple(values[k].shape)} for {tuple(wanted[k].shape)}"
        for k in set(wanted) & set(values)
        if tuple(values[k].shape) != tuple(wanted[k].shape)
    )
    if missing or extra or wrong:
        raise ConversionError(
            f"{where}: the converted parameters do not fit the model: missing {missing[:5]}, "
            f"unknown {extra[:5]}, wrong shapes {wrong[:5]}."
        )
    arrays = [np.asarray(values[_path(path)], dtype=np.dtype(leaf.dtype)) for path, leaf in leaves]
    return jax.tree_util.tree_unflatten(treedef, arrays)
