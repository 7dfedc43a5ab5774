"""The documents' measured figures, generated from the results files that hold them.

A figure in README.md, docs/*.md, benchmarks/README.md or a config's docstring (configs/*.py)
is written between two markers, on one line, that name where it comes from: a file of
benchmarks/results, a path into it (keys and list indices separated by `/`) and a format:

    <!--fig main_job_default.json:summary/bleu/mean:.2f-->99.53<!--/fig-->

The format is Python's format spec (`.2f`, `.2%`, `,`), or `min` for seconds written as
"4 min 35 s". A ratio of two figures of one file is written as two paths joined by `÷`
(`rows/0/ms/f32÷rows/0/ms/w8a8:.2f`: how many times faster), a difference as two paths joined
by `−` (U+2212: `runs/a/bleu−runs/b/bleu:+.2f`: how far ahead). Markdown shows only the figure.
Rerunning a benchmark rewrites its results file; then

    python benchmarks/figures.py            # rewrites every figure from the results files
    python benchmarks/figures.py --check    # lists the stale ones (exit code 1), changes nothing

tests/test_figures.py runs the check: a document that disagrees with its results file fails
the suite.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
MARKER = re.compile(r"<!--fig (?P<file>[\w.-]+):(?P<path>[^:>]+):(?P<spec>[^>]*?)-->"
                    r"(?P<value>.*?)<!--/fig-->")  # fmt: skip


class FigureError(ValueError):
    """A marker whose file, path or format does not give a figure."""


def documents(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The documents that may hold figures: the pages, and the configs, whose docstrings give
    the result to expect."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md")),
            root / "benchmarks" / "README.md",
            *sorted((root / "configs").glob("*.py"))]  # fmt: skip


def lookup(tree, path: str):
    """`tree` at a path of keys and list indices separated by `/`."""
    for part in path.split("/"):
        if isinstance(tree, list) and part.isdigit() and int(part) < len(tree):
            tree = tree[int(part)]
        elif isinstance(tree, dict) and part in tree:
            tree = tree[part]
        else:
            raise FigureError(f"no {part!r} at {path!r}")
    return tree


def minutes(seconds: float) -> str:
    """4 min 35 s (seconds rounded)."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def render(file: str, path: str, spec: str, results: pathlib.Path = RESULTS) -> str:
    """The figure a marker names, formatted."""
    source = results / file
    try:
        tree = json.loads(source.read_text())
        if "÷" in path and "−" in path:
            raise FigureError(f"{path!r} both divides and subtracts: write one of them")
        operator = "−" if "−" in path else "÷"
        paths = path.split(operator)
        parts = [lookup(tree, part) for part in paths]
    except OSError as e:
        raise FigureError(f"{source} cannot be read: {e}") from e
    except FigureError as e:
        raise FigureError(f"{source}: {e}") from e
    for part, value in zip(paths, parts, strict=True):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise FigureError(f"{source}: {part} is {value!r}, not a number")
    value = parts[0]
    for other in parts[1:]:
        if operator == "−":
            value = value - other
        elif other == 0:
            raise FigureError(f"{source}: {path} divides by zero")
        else:
            value = value / other
    if spec == "min":
        return minutes(value)
    try:
        return format(value, spec)
    except ValueError as e:
        raise FigureError(f"{source}: format {spec!r}: {e}") from e


def refresh(text: str, results: pathlib.Path = RESULTS) -> tuple[str, list[str]]:
    """`text` with every figure regenerated, and what changed ("was -> now" per figure)."""
    changes = []

    def one(match: re.Match) -> str:
        now = render(match["file"], match["path"], match["spec"], results)
        if now != match["value"]:
            changes.append(f"{match['file']}:{match['path']}: {match['value']} -> {now}")
        return f"<!--fig {match['file']}:{match['path']}:{match['spec']}-->{now}<!--/fig-->"

    return MARKER.sub(one, text), changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list stale figures, change none")
    args = parser.parse_args(argv)
    stale = 0
    for doc in documents():
        text = doc.read_text(encoding="utf-8")
        try:
            new, changes = refresh(text)
        except FigureError as e:
            print(f"{doc.relative_to(ROOT)}: {e}", file=sys.stderr)
            return 1
        for change in changes:
            print(f"{doc.relative_to(ROOT)}: {change}")
        stale += len(changes)
        if changes and not args.check:
            doc.write_text(new, encoding="utf-8")
    if args.check and stale:
        print(f"{stale} stale figure(s): run python benchmarks/figures.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
