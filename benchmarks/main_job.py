"""A main job run as a user runs it, and its figures recorded with their provenance.

For each seed, `python train.py --config=CONFIG --workdir=ROOT/NAME-sSEED --config.seed=SEED
[overrides]` in a subprocess, from an empty workdir, timed from the command's start to its
end (data preparation, training, the final test and its baselines). The test record of each
run (metrics.jsonl), the mean over the seeds, the command, the date, the machine and the
package versions go to benchmarks/results/main_job_NAME.json, which the documents' figures are
generated from (benchmarks/figures.py).

  python benchmarks/main_job.py --config=configs/vit_fashion_mnist.py --seeds=0,1,2
  python benchmarks/main_job.py --config=configs/default.py

A workdir that already holds a test record is read back, not trained again; its time is the
one recorded before for the same workdir, if any. Run it alone on the machine: the times are
figures too. XLA_FLAGS, when set, passes to the commands and shows in their record (on a CPU
host, `XLA_FLAGS=--xla_force_host_platform_device_count=2` splits two cores into two devices).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import platform
import shlex
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.finished_runs import last_test  # noqa: E402

PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "scikit-learn")


def machine() -> dict:
    """The machine the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}


def versions(packages: tuple[str, ...] = PACKAGES) -> dict:
    """Python's and `packages`' versions (None for one not installed)."""
    found = {"python": platform.python_version()}
    for name in packages:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def run_seed(config: str, workdir: pathlib.Path, seed: int, overrides: list[str]) -> tuple:
    """(the test record, seconds the command took or None when read back, the command)."""
    cmd = [sys.executable, "train.py", f"--config={config}", f"--workdir={workdir}",
           f"--config.seed={seed}", *overrides]  # fmt: skip
    shown = shlex.join(["python", *cmd[1:]])
    if os.environ.get("XLA_FLAGS"):  # Inherited by the command (CPU devices, say): shown too.
        shown = f"XLA_FLAGS={shlex.quote(os.environ['XLA_FLAGS'])} {shown}"
    test = last_test(workdir)
    if test is not None:
        return test, None, shown
    started = time.time()
    done = subprocess.run(cmd, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"{shown} failed with exit code {done.returncode}")
    test = last_test(workdir)
    if test is None:
        raise SystemExit(f"{shown} wrote no test record to {workdir}/metrics.jsonl")
    return test, round(time.time() - started, 1), shown


def summarise(runs: list[dict]) -> dict:
    """The mean, min and max over the runs of every numeric test metric they all have."""
    keys = set.intersection(*(set(r["test"]) for r in runs))
    out = {}
    for key in sorted(keys):
        values = [r["test"][key] for r in runs]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = {"mean": statistics.fmean(values), "min": min(values), "max": max(values)}
    seconds = [r["seconds"] for r in runs if r["seconds"] is not None]
    if seconds:
        out["seconds"] = {"mean": statistics.fmean(seconds), "min": min(seconds),
                          "max": max(seconds)}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="configs/NAME.py")
    parser.add_argument("--seeds", default="0", help="comma-separated config.seed values")
    parser.add_argument("--root", default="runs/main_jobs", help="where the workdirs go")
    parser.add_argument("--out", default=None, help="default benchmarks/results/main_job_NAME.json")
    args, overrides = parser.parse_known_args(argv)
    bad = [o for o in overrides if not o.startswith("--config.")]
    if bad:
        parser.error(f"unknown arguments {bad}: only --config.FIELD=VALUE overrides pass through")
    name = pathlib.Path(args.config).stem
    out = pathlib.Path(args.out or ROOT / "benchmarks" / "results" / f"main_job_{name}.json")
    before = json.loads(out.read_text()) if out.is_file() else {}
    timed = {r["workdir"]: r["seconds"] for r in before.get("runs", [])}
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        workdir = pathlib.Path(args.root) / f"{name}-s{seed}"
        test, seconds, command = run_seed(args.config, workdir, seed, overrides)
        if seconds is None:
            seconds = timed.get(str(workdir))
        runs.append({"seed": seed, "workdir": str(workdir), "command": command,
                     "seconds": seconds, "test_step": test["step"], "test": test})  # fmt: skip
        print(f"seed {seed}: {json.dumps({k: v for k, v in test.items() if k != 'split'})}")
    result = {
        "config": args.config,
        "command": shlex.join(["python", "benchmarks/main_job.py", *(argv or sys.argv[1:])]),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "versions": versions(),
        "runs": runs,
        "summary": summarise(runs),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
