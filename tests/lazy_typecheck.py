"""The test suite's run-time type checks (jaxtyping's import hook with beartype), built for each
function when it is first called instead of when its module is imported.

The hook decorates every function of the package: building the checks of one costs two generated
signature functions and two beartype wrappers, and most functions are never called by the tests
one worker runs. Deferred, a function's first call builds exactly the checks the import would
have built, and every call is checked as before.

The modules that the package imports at its top level are imported before the hook is
installed: while the hook executes one of the package's modules it points Python's bytecode cache
at file names of its own, so a third-party module first imported from there (jax, flax, orbax and
the rest) would be compiled from source again instead of read from its cache.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
import inspect
import pathlib
import threading

import jaxtyping

_eager_jaxtyped = jaxtyping.jaxtyped
_UNSET = object()


def _lazy_jaxtyped(fn=_UNSET, **kwargs):
    """`jaxtyping.jaxtyped`, deferred to the first call for plain functions (what the import
    hook decorates); classes and every other use go to jaxtyping at once."""
    if fn is _UNSET:
        return functools.partial(_lazy_jaxtyped, **kwargs)
    if set(kwargs) != {"typechecker"} or not inspect.isfunction(fn):
        return _eager_jaxtyped(fn, **kwargs)
    checked = None
    lock = threading.Lock()

    @functools.wraps(fn)
    def first_call_builds_the_checks(*args, **kw):
        nonlocal checked
        if checked is None:
            with lock:
                if checked is None:
                    checked = _eager_jaxtyped(fn, **kwargs)
        return checked(*args, **kw)

    return first_call_builds_the_checks


def _top_level_imports(node: ast.AST) -> set[str]:
    """The modules a module's top level imports (also inside top-level if/try/with blocks)."""
    names: set[str] = set()
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            names.update(alias.name for alias in child.names)
        elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
            names.add(child.module)
        elif isinstance(child, (ast.If, ast.Try, ast.With, ast.ExceptHandler)):
            names |= _top_level_imports(child)
    return names


def install(package: str) -> None:
    """Checks every annotated function of `package` (imported after this call) with beartype,
    through jaxtyping's import hook, each built at its first call."""
    root = pathlib.Path(importlib.util.find_spec(package).origin).parent
    imports = set()
    for path in root.rglob("*.py"):
        imports |= _top_level_imports(ast.parse(path.read_bytes(), str(path)))
    for name in sorted(n for n in imports if n.split(".")[0] != package):
        with contextlib.suppress(Exception):  # An extra that is not installed: never imported.
            importlib.import_module(name)
    jaxtyping.jaxtyped = _lazy_jaxtyped  # The name the hook's inserted decorators look up.
    jaxtyping.install_import_hook(package, "beartype.beartype")
