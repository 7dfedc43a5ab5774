"""How long the README's test command takes on this machine, as a fresh machine runs it.

Runs `python -m pytest -q -n 2` (the README's command; other pytest arguments after `--`) in
the source tree as on a fresh clone: an empty JAX compilation cache, no Python bytecode of the
project's own files, and bytecode written as Python writes it by default (PYTHONDONTWRITEBYTECODE
is dropped from the environment). It records the wall time, the tests' own time summed, the
outcome counts and the slowest tests, with the date, machine, versions and commit:

    python benchmarks/suite_time.py                   # prints the record
    python benchmarks/suite_time.py --out=benchmarks/results/suite_time.json

Run it on an idle machine: the suite uses every core it is given. The README's figure of the
suite's time comes from the recorded file (benchmarks/figures.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for benchmarks.main_job

from benchmarks.main_job import machine, versions  # noqa: E402

COMMAND = ["python", "-m", "pytest", "-q", "-n", "2"]  # The README's, after its install.
FRESH_CLONE_LACKS = ("transformer_jax", "tests", "configs", "benchmarks", "notebooks")
DURATION = re.compile(r"^\s*(?P<s>[\d.]+)s (?P<phase>setup|call|teardown)\s+(?P<test>\S+)")
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def parse(output: str, slowest: int = 15) -> dict:
    """The outcome counts, the summed test time and the slowest tests of pytest's output (run
    with --durations=0)."""
    durations = [m.groupdict() for line in output.splitlines() if (m := DURATION.match(line))]
    final = [line for line in output.splitlines() if " in " in line and COUNT.search(line)]
    counts = {kind.rstrip("s") if kind.startswith("error") else kind: int(n)
              for n, kind in COUNT.findall(final[-1])} if final else {}  # fmt: skip
    by_test: dict[str, float] = {}
    for d in durations:
        by_test[d["test"]] = by_test.get(d["test"], 0.0) + float(d["s"])
    top = sorted(by_test.items(), key=lambda kv: -kv[1])[:slowest]
    return {
        "counts": counts,
        "test_seconds": round(sum(by_test.values()), 1),
        "slowest": [{"test": t, "seconds": round(s, 1)} for t, s in top],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="a JSON file to write the record to")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    for folder in FRESH_CLONE_LACKS:  # What a fresh clone has not compiled yet.
        for cached in (ROOT / folder).rglob("__pycache__"):
            shutil.rmtree(cached, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="suite_cache_") as cache:
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": cache}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # A fresh machine writes bytecode.
        cmd = [sys.executable, *COMMAND[1:], "--durations=0", "-p", "no:cacheprovider"]
        started = time.time()
        done = subprocess.run(
            [*cmd, *args.pytest_args], cwd=ROOT, env=env, capture_output=True, text=True
        )
        wall = time.time() - started
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    record = {
        "command": " ".join(COMMAND + args.pytest_args),
        "compilation_cache": "empty",
        "python_bytecode": "none of the project's at the start, written as it runs",
        "exit_code": done.returncode,
        "wall_seconds": round(wall, 1),
        **parse(done.stdout),
        "date": datetime.date.today().isoformat(),
        "commit": commit,
        "machine": machine(),
        "versions": versions(),
    }
    text = json.dumps(record, indent=1)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")
    if done.returncode:
        print(done.stdout[-5000:], file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
