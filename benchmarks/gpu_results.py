"""Joins the `gpu_measure.json` of one or more calls on a GPU machine into
benchmarks/results/gpu_measure.json, the file the documents' GPU figures come from.

    python benchmarks/gpu_results.py CALL1/gpu_measure.json CALL2/gpu_measure.json \\
        [--command 'CALL1/gpu_measure.json=python3 benchmarks/gpu_measure.py ...']

A GPU machine is lent for a few minutes at a time, so one measurement may take several calls
(`--only` the cases a first call ran out of time for). Every call is kept whole under `calls`,
in the order given; `rows` holds, per case and kind (a decoding method), the row of the last
call that measured it; `tests` the last call's GPU-test step. A call without its command in
its meta (`gpu_measure.py` records it) takes it from `--command`.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gpu_measure.json"


def join(calls: list[dict]) -> dict:
    """The calls' results as one: every call, the last measured row per (case, kind), the last
    tests step, and the last call's device.

    Raises:
      ValueError: no call, a dry run among them, or calls on different devices.
    """
    if not calls:
        raise ValueError("no gpu_measure.json given")
    if any(c["meta"].get("dry_run") for c in calls):
        raise ValueError("a dry run holds no GPU figures: give the calls made on the GPU")
    devices = {c["meta"].get("device", {}).get("device") for c in calls} - {None}
    if len(devices) > 1:
        raise ValueError(f"calls on different devices {sorted(devices)}: join one device's")
    rows: dict[tuple, dict] = {}
    tests = None
    for index, call in enumerate(calls):
        for row in call["rows"]:
            if "error" not in row:
                rows[(row["case"], row["kind"])] = {**row, "call": index}
        tests = next((dict(s, call=index) for s in call["steps"] if s["name"] == "tests"), tests)
    device = next((c["meta"]["device"] for c in reversed(calls) if c["meta"].get("device")), {})
    return {"device": device, "calls": calls, "rows": list(rows.values()), "tests": tests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("calls", nargs="+", help="gpu_measure.json of each call, in order.")
    parser.add_argument("--command", action="append", default=[],
                        help="PATH=COMMAND, for a call whose meta lacks its command.")  # fmt: skip
    parser.add_argument("--note", help="What a reader of the figures must know about the calls.")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    commands = dict(c.split("=", 1) for c in args.command)
    calls = []
    for path in args.calls:
        try:
            call = json.loads(pathlib.Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"{path}: not a gpu_measure.json ({e})")
        call["meta"].setdefault("command", commands.get(path))
        calls.append(call)
    try:
        joined = join(calls)
    except ValueError as e:
        sys.exit(str(e))
    if args.note:
        joined = {"note": args.note, **joined}
    pathlib.Path(args.out).write_text(json.dumps(joined, indent=1) + "\n")
    print(f"{args.out}: {len(joined['rows'])} rows from {len(calls)} calls")


if __name__ == "__main__":
    main()
