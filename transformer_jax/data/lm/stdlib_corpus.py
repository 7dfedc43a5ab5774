"""The embedded language-model corpus: the running Python's own standard-library documentation.

Real English that ships with every Python, offline. `stdlib_gather.py` collects module, class
and function docstrings and the language reference's topics (`pydoc_data.topics`), cleaned and
deduplicated, in a subprocess; the documents are split into train / eval / test **by module**
(a stable hash of the module's name: about 90 / 5 / 5% of modules), so no module's text is
seen in two splits. For a given Python the corpus is deterministic; its version and a content
hash are recorded (`manifest()`, written to the workdir as cache/stdlib_corpus.json).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import subprocess
import sys
import tempfile

from transformer_jax import storage

GATHER_SCRIPT = pathlib.Path(__file__).with_name("stdlib_gather.py")
EVAL_PERCENT, TEST_PERCENT = 5, 5  # Shares of modules held out (by hash of the name).
SPLITS = ("train", "eval", "test")


def split_of(module: str) -> str:
    """ "train", "eval" or "test" for a module name, from its SHA-256 (stable everywhere)."""
    bucket = int.from_bytes(hashlib.sha256(module.encode("utf-8")).digest()[:8], "big") % 100
    if bucket < EVAL_PERCENT:
        return "eval"
    if bucket < EVAL_PERCENT + TEST_PERCENT:
        return "test"
    return "train"


@dataclasses.dataclass(frozen=True)
class StdlibCorpus:
    """The documents of each split, their modules, and where they came from.

    Attributes:
      python_version: the interpreter that wrote the docstrings, e.g. "3.11.7".
      sha256: hash of every document's module and text, in order (changes with the Python).
      splits: "train" / "eval" / "test" -> document texts in a fixed order.
      modules: the same keys -> the module of each document (parallel lists).
    """

    python_version: str
    sha256: str
    splits: dict[str, list[str]]
    modules: dict[str, list[str]]

    @classmethod
    def from_documents(cls, python_version: str, documents: list[dict]) -> StdlibCorpus:
        """Splits gathered documents (`{"module", "name", "text"}` dicts) by module."""
        splits = {s: [] for s in SPLITS}
        modules = {s: [] for s in SPLITS}
        digest = hashlib.sha256(python_version.encode())
        for doc in documents:
            split = split_of(doc["module"])
            splits[split].append(doc["text"])
            modules[split].append(doc["module"])
            digest.update(f"\0{doc['module']}\0{doc['text']}".encode())
        return cls(python_version, digest.hexdigest(), splits, modules)

    def manifest(self) -> dict:
        """Version, hash, and per split: documents, modules, characters and UTF-8 bytes."""
        return {
            "python_version": self.python_version,
            "sha256": self.sha256,
            **{
                split: {
                    "documents": len(texts),
                    "modules": len(set(self.modules[split])),
                    "characters": sum(len(t) for t in texts),
                    "bytes": sum(len(t.encode("utf-8")) for t in texts),
                }
                for split, texts in self.splits.items()
            },
        }


def _python_version() -> str:
    return ".".join(str(v) for v in sys.version_info[:3])


def gather_documents() -> list[dict]:
    """Runs stdlib_gather.py in a fresh interpreter; returns its documents."""
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "docs.json"
        done = subprocess.run(
            # -S: no site-packages, whose setuptools would replace the stdlib's distutils.
            [sys.executable, "-S", str(GATHER_SCRIPT), str(out)],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp,  # not the caller's folder: a local module must not shadow the stdlib's
            # A bare environment: nothing of the user's may reach the corpus (and set reprs
            # must not depend on the hash seed).
            env={"PYTHONSAFEPATH": "1", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"},
        )
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(
                f"Gathering the stdlib documentation failed (exit {done.returncode}): "
                f"{done.stderr[-2000:]}\nRun `{sys.executable} {GATHER_SCRIPT} out.json` to "
                f"see the error, or train on your own text (data.source='text')."
            )
        result = json.loads(out.read_text(encoding="utf-8"))
    if result["python_version"] != _python_version():
        raise RuntimeError(
            f"gathered by Python {result['python_version']}, not {_python_version()}"
        )
    return result["documents"]


def load_stdlib_corpus(cache_dir: str | os.PathLike | None = None) -> StdlibCorpus:
    """The corpus of this Python, gathered once and cached in `cache_dir` (None: no cache).

    The cache file is named after the Python version, and the version inside is checked, so
    another interpreter gathers its own corpus instead of reading a stale one.

    Raises:
      RuntimeError: the gathering subprocess failed (its error is included).
      ValueError: it found no documents.
    """
    version = _python_version()
    path = None
    if cache_dir is not None:
        path = storage.as_path(cache_dir) / f"stdlib_docs-py{version}.json"
        if path.exists():
            try:
                cached = json.loads(path.read_bytes())
                if cached.get("python_version") == version:
                    return StdlibCorpus.from_documents(version, cached["documents"])
            except (ValueError, KeyError, TypeError, AttributeError) as e:  # Gathered again.
                logging.warning("%s: damaged cache (%s: %s); gathering again.", path,
                                type(e).__name__, e)  # fmt: skip
    documents = gather_documents()
    if not documents:
        raise ValueError(
            f"No documentation found in this Python ({sys.executable}): it may be stripped "
            f"of docstrings (python -OO). Train on your own text (data.source='text')."
        )
    if path is not None:
        payload = json.dumps({"python_version": version, "documents": documents})
        storage.write_text_atomic(path, payload)
    return StdlibCorpus.from_documents(version, documents)
