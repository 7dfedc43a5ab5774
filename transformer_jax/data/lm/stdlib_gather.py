"""Gather the standard library's documentation from the running Python, as JSON.

    python transformer_jax/data/lm/stdlib_gather.py OUT.json

Run as a script in a subprocess of its own (see stdlib_corpus.py): it imports hundreds of
modules, which must not happen in a training process. Only the standard library is used here.

Documents, in a fixed order (modules sorted by name, objects by name within a module):
- each public module's docstring;
- each public class defined in that module: a `class Name(Bases)` line, its own docstring, and
  `name(signature)` with the own docstring of each public method it defines;
- each public function defined in that module: `name(signature)` and its docstring;
- each topic of the language reference in `pydoc_data.topics` (module `pydoc_data.topics/KEY`).
A docstring already used (e.g. an inherited "Initialize self." copied onto many classes) is
used once, at its first place in that order, so no text repeats across documents or splits.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import pkgutil
import platform
import re
import sys
import warnings

MIN_CHARS = 64  # Shorter documents are mostly boilerplate ("Return self==value.").
MAX_DEFAULT_CHARS = 60  # Longer default values in signatures are elided.
# Not imported: tests, GUIs and demos, modules with side effects on import, deprecated trees.
SKIP = {
    "antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "lib2to3",
    "ensurepip", "pydoc_data", "__phello__", "__hello__", "xxlimited", "xxsubtype",
}  # fmt: skip
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # Default values' reprs: differ at every run.


def clean(text: str) -> str:
    """Unix line ends, no control characters but newline and tab, no trailing spaces, at most
    one blank line in a row, stripped."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def module_names() -> list[str]:
    """Public stdlib modules and their public submodules, sorted."""
    names = set()
    for top in sorted(sys.stdlib_module_names):
        if top in SKIP or not _public(top):
            continue
        names.add(top)
        module = _import(top)
        if module is None or not hasattr(module, "__path__"):
            continue
        for info in pkgutil.walk_packages(module.__path__, top + ".", onerror=lambda _: None):
            parts = info.name.split(".")
            if _public(info.name) and not {"test", "tests", "__main__"} & set(parts):
                names.add(info.name)
    return sorted(names)


def _import(name: str):
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return __import__(name, fromlist=["_"])
    except KeyboardInterrupt:
        raise
    except BaseException:  # ImportError, SystemExit, platform errors: skip the module.
        return None


_MACHINE = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.executable, os.path.expanduser("~")}


def _elide(default_repr: str) -> bool:
    """Defaults too long to read, or naming this machine's paths (not the same elsewhere)."""
    if "environ(" in default_repr:  # os.environ, however short this process's is
        return True
    return len(default_repr) > MAX_DEFAULT_CHARS or any(m in default_repr for m in _MACHINE)


class _Elided:
    def __repr__(self) -> str:
        return "..."


def _signature(obj) -> str:
    """`(a, b=1)`; a default with a long repr (`environ=os.environ` would print the whole
    environment, secrets included) or naming this machine's paths is shown as `...`."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = [
        p.replace(default=_Elided()) if p.default is not p.empty and _elide(repr(p.default)) else p
        for p in signature.parameters.values()
    ]
    return _ADDRESS.sub("", str(signature.replace(parameters=params)))


class _Collector:
    def __init__(self):
        self.seen: set[str] = set()
        self.documents: list[dict[str, str]] = []

    def fresh(self, doc) -> str | None:
        """The cleaned docstring if it is text not used before, else None."""
        if not isinstance(doc, str):
            return None
        text = _ADDRESS.sub("", clean(inspect.cleandoc(doc)).replace("\x1e", ""))
        if not text or text in self.seen:
            return None
        self.seen.add(text)
        return text

    def add(self, module: str, name: str, text: str) -> None:
        if len(text) >= MIN_CHARS:
            self.documents.append({"module": module, "name": name, "text": text})

    def module(self, name: str) -> None:
        module = _import(name)
        if module is None:
            return
        doc = self.fresh(getattr(module, "__doc__", None))
        if doc:
            self.add(name, name, doc)
        for attr in sorted(vars(module)):
            obj = vars(module)[attr]
            if attr.startswith("_") or getattr(obj, "__module__", None) != name:
                continue
            if inspect.isclass(obj):
                self.klass(name, attr, obj)
            elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
                doc = self.fresh(obj.__doc__)
                if doc:
                    self.add(name, attr, f"{attr}{_signature(obj)}\n\n{doc}")

    def klass(self, module: str, name: str, cls) -> None:
        bases = ", ".join(b.__name__ for b in cls.__bases__ if b is not object)
        parts = [f"class {name}({bases})" if bases else f"class {name}"]
        doc = self.fresh(cls.__dict__.get("__doc__"))
        if doc:
            parts.append(doc)
        for attr in sorted(cls.__dict__):
            member = cls.__dict__[attr]
            if attr.startswith("_"):
                continue
            func = getattr(member, "__func__", member)  # staticmethod / classmethod
            if isinstance(member, property):
                func = member.fget
            if not callable(func) and not isinstance(member, property):
                continue
            doc = self.fresh(getattr(func, "__doc__", None))
            if doc:
                signature = "" if isinstance(member, property) else _signature(func)
                parts.append(f"{attr}{signature}\n    " + doc.replace("\n", "\n    "))
        if len(parts) > 1:
            self.add(module, name, "\n\n".join(parts))

    def topics(self) -> None:
        from pydoc_data.topics import topics

        for key in sorted(topics):
            doc = self.fresh(topics[key])
            if doc:
                self.add(f"pydoc_data.topics/{key}", key, doc)


def gather() -> dict:
    """The documents and the interpreter that produced them."""
    collector = _Collector()
    names = module_names()
    for name in names:
        collector.module(name)
    collector.topics()
    return {
        "python_version": platform.python_version(),
        "python": sys.version,
        "modules_imported": len(names),
        "documents": collector.documents,
    }


if __name__ == "__main__":
    result = json.dumps(gather())
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        f.write(result)
