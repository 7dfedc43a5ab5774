"""Finished train.py runs gathered into one results file: what each run changed and what it
measured, so that a recipe's "one change at a time" table is generated from the runs.

    python benchmarks/collect_runs.py --config=configs/vit_fashion_mnist.py \
        --out=benchmarks/results/vit_fashion_mnist_recipe.json \
        stem32=/tmp/fs/s3 no_augmentation=/tmp/fs/A

For each NAME=WORKDIR: the config fields whose values differ from `--config` (the run's
config.json against the config file's get_config(); null for a field the run's config lacks),
the test record and the validation records of metrics.jsonl, the `evaluate` command's records
of the workdir (`eval/*.json`, by file name, e.g. the test split greedy from the last
checkpoint beside the config's beam over averaged checkpoints), and the run's seconds: from its
config.json being written (the run's start, before data preparation) to its last training
record (`train_seconds`) and to its test record (`seconds`), and the median over its training
records of each throughput it logs (`per_sec`, e.g. `tokens_per_sec`); of a workdir copied
since, or a run resumed after a stop, these are not the run's time. The runs are not retrained;
their workdirs are recorded. `--attach=NAME=FILE` (repeatable) copies a JSON file the runs
share into the record under NAME, e.g. the manifest of the corpus they trained on.
`--mean=NAME=RUN,RUN,...` (repeatable) records under `means/NAME` the mean over those runs
(e.g. seeds) of each number of their test records and of the `evaluate` records they share.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def flatten(tree: dict, prefix: str = "") -> dict:
    """{"data.batch_size": 128, ...} from nested dicts."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def base_fields(config_path: str) -> dict:
    """The flattened fields of a config file's get_config()."""
    spec = importlib.util.spec_from_file_location("base_config", ROOT / config_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return flatten(json.loads(module.get_config().to_json()))


def collect(workdir: pathlib.Path, base: dict) -> dict:
    """What a finished run changed against `base`, its test record and its validation records."""
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    tests = [r for r in rows if r["split"] == "test"]
    if not tests:
        raise SystemExit(f"{workdir}: no test record in metrics.jsonl (did the run finish?)")
    ran = flatten(json.loads((workdir / "config.json").read_text()))
    changed = {k: v for k, v in ran.items() if k in base and base[k] != v}
    # A field the config file has and the run's config.json lacks came after the run (the run
    # had its default then): null.
    changed |= {k: None for k in base if k not in ran}
    started = (workdir / "config.json").stat().st_mtime
    train = [r for r in rows if r["split"] == "train"]
    trained = max(r["time"] for r in train)
    rates = sorted({k for r in train for k in r if k.endswith("_per_sec")})
    return {
        "workdir": str(workdir),
        "changed": changed,
        "train_seconds": round(trained - started, 1),
        "seconds": round(tests[-1]["time"] - started, 1),
        "per_sec": {k: statistics.median(r[k] for r in train if k in r) for k in rates},
        "test": tests[-1],
        "eval": {str(r["step"]): r for r in rows if r["split"] == "eval"},
        "evaluations": {
            path.stem: json.loads(path.read_text())
            for path in sorted((workdir / "eval").glob("*.json"))
        },
    }


def mean_record(records: list[dict]) -> dict:
    """The mean of each number the records share (nested dicts: key by key)."""
    out = {}
    for key, first in records[0].items():
        values = [r.get(key) for r in records]
        if isinstance(first, dict) and all(isinstance(v, dict) for v in values):
            out[key] = mean_record(values)
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = statistics.mean(values)
    return out


def means(runs: dict, groups: list[str], parser: argparse.ArgumentParser) -> dict:
    """`--mean=NAME=RUN,RUN,...`: per group, the mean test record and evaluate records."""
    out = {}
    for item in groups:
        name, sep, names = item.partition("=")
        members = names.split(",") if sep else []
        if not name or len(members) < 2 or any(m not in runs for m in members):
            parser.error(f"--mean={item!r} is not NAME=RUN,RUN,... over runs given here")
        chosen = [runs[m] for m in members]
        out[name] = {
            "runs": members,
            "test": mean_record([r["test"] for r in chosen]),
            "evaluations": mean_record([r["evaluations"] for r in chosen]),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="the config the runs are compared to")
    parser.add_argument("--out", required=True, help="the results file to write")
    parser.add_argument(
        "--attach", action="append", default=[], help="NAME=FILE: a JSON file to include"
    )
    parser.add_argument(
        "--mean", action="append", default=[], help="NAME=RUN,RUN,...: the runs' mean figures"
    )
    parser.add_argument("runs", nargs="+", help="NAME=WORKDIR, one per run")
    args = parser.parse_args(argv)
    attached = {}
    for item in args.attach:
        name, sep, path = item.partition("=")
        taken = ("", "config", "date", "runs", "means")
        if not sep or name in taken or not pathlib.Path(path).is_file():
            parser.error(f"--attach={item!r} is not NAME=FILE with a new NAME and an existing FILE")
        attached[name] = json.loads(pathlib.Path(path).read_text())
    base = base_fields(args.config)
    runs = {}
    for item in args.runs:
        name, sep, workdir = item.partition("=")
        if not sep or not name or not workdir:
            parser.error(f"{item!r} is not NAME=WORKDIR")
        runs[name] = collect(pathlib.Path(workdir), base)
    record = {"config": args.config, "date": time.strftime("%Y-%m-%d"), "runs": runs}
    if args.mean:
        record["means"] = means(runs, args.mean, parser)
    record |= attached
    pathlib.Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}: {', '.join(runs)}")


if __name__ == "__main__":
    main()
