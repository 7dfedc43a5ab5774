"""Names kept for one release after a rename or a move: a module `__getattr__` (PEP 562).

    # In transformer_jax/models/encoder_decoder/__init__.py:
    __getattr__ = deprecated_names(
        __name__, {"Transformer": "transformer_jax.models.encoder_decoder.EncoderDecoder"}
    )

An old name then still imports, and is the very object its new name is, but each use warns
(`DeprecationWarning`) with the import to write instead, so callers see what to change before
the name goes. The new home is imported only when an old name is used: a name that moved into a
subpackage with heavy imports costs nothing to the callers that never ask for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from collections.abc import Callable, Mapping
from typing import no_type_check


def deprecated_names(
    module: str, new_homes: Mapping[str, str], stacklevel: int = 2
) -> Callable[[str], object]:
    """A `__getattr__` for `module` that serves each old name from its new home, with a warning.

    Args:
      module: the name of the module that held the old names (its `__name__`).
      new_homes: old name -> the dotted path of what replaces it ("package.module.NewName").
      stacklevel: the warning's frame: 2, the caller's line, when the returned function is the
        module's `__getattr__`; 3 when the module's own `__getattr__` calls it.

    Returns:
      The function to assign to the module's `__getattr__`; other missing names raise
      AttributeError as usual.
    """

    # stacklevel=2 is the caller's line only if nothing wraps this function: no_type_check keeps
    # the test suite's jaxtyping import hook from adding a checking frame around it.
    @no_type_check
    def __getattr__(name: str) -> object:
        if name not in new_homes:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, _, new_name = new_homes[name].rpartition(".")
        warnings.warn(
            f"{module}.{name} is deprecated and will be removed in the next release: "
            f"use `from {home} import {new_name}`.",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        return getattr(importlib.import_module(home), new_name)

    return __getattr__


def moved_names(module: str, new_module: str) -> Callable[[str], object]:
    """A `__getattr__` for `module` that serves, with a warning, every name `new_module` exports
    (its `__all__`), imported only when an old name is used; other names raise AttributeError."""
    homes: dict[str, str] = {}

    @no_type_check  # See deprecated_names.
    def __getattr__(name: str) -> object:
        # Dunder lookups (copy, pickle) and the package's own submodules (`from package import
        # submodule` asks here first) are not old names: the import system goes on.
        if name.startswith("__") or importlib.util.find_spec(f"{module}.{name}") is not None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        if not homes:
            exported = importlib.import_module(new_module).__all__
            homes.update({n: f"{new_module}.{n}" for n in exported})
        return deprecated_names(module, homes, stacklevel=3)(name)

    return __getattr__
