"""Benchmark runs that are trained once and read back: a workdir that already holds a test
record is not trained again, unless the settings it ran with differ from those asked for."""

from __future__ import annotations

import json
import pathlib
import time

from transformer_jax.training.loop import train_and_evaluate


def last_test(workdir: pathlib.Path) -> dict | None:
    """The last test record of a finished run, or None."""
    path = workdir / "metrics.jsonl"
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    tests = [r for r in rows if r["split"] == "test"]
    return tests[-1] if tests else None


def train_or_read(config, workdir: pathlib.Path, keys=("num_train_steps",), hint: str = ""):
    """(the run's test record, seconds it trained or None when read back).

    A finished run is read back only if its `config.json` agrees with `config` on `keys`
    (dotted paths); otherwise the benchmark stops, naming the first difference.
    """
    test, seconds = last_test(workdir), None
    if test is not None:
        ran = json.loads((workdir / "config.json").read_text())
        for key in keys:
            saved, wanted = _get(ran, key), _get(config.to_dict(), key)
            if saved != wanted:
                raise SystemExit(
                    f"{workdir} ran with {key}={saved!r}, but this benchmark asks for "
                    f"{wanted!r}: {hint or 'pass another --root, or remove that workdir.'}"
                )
    else:
        started = time.time()
        train_and_evaluate(config, str(workdir))
        test, seconds = last_test(workdir), round(time.time() - started, 1)
    return test, seconds


def _get(tree: dict, dotted: str):
    for part in dotted.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree
