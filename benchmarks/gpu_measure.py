"""One call to measure a GPU: install what the machine lacks, run the GPU tests, measure the
paper-sized models' train steps and decoding.

On the GPU machine, from the repository root, with benchmarks/gpu_wheels/ carried along:

    python3 benchmarks/gpu_measure.py --out=$OUT

The wheels are built beforehand where the package index is reachable, by
`python benchmarks/gpu_wheels.py`. The steps, each timed; a step that fails is recorded and the
next one runs:

1. install: the wheels of benchmarks/gpu_wheels/manifest.json whose distribution the machine
   lacks, into a folder of their own (`pip install --no-index --no-deps --target`, never over
   the machine's jax or CUDA), put on PYTHONPATH with the repository (the project is not
   installed, only imported from there).
2. imports: transformer_jax, the configs and pytest import; JAX sees the GPU.
3. tests: `python3 -m pytest -m gpu tests/gpu` with JAX_PLATFORMS=cuda: cuDNN attention
   against the reference, and train.py on the tiny config.
4. throughput: benchmarks/gpu_throughput.py in a child process (started again after a crash,
   without the case that crashed): the base and big translation models, GPT-2 small, BERT-base
   and ViT-B/16 train steps in bfloat16, and decoding; `--only` picks among them.

Steps 3 and 4 run in `--only`'s order, by default the translation models first, then the tests,
then the other cases: a call cut short keeps what matters most.

Everything runs within `--budget_s` seconds; what is left out for lack of time is recorded.
Writes gpu_measure.json (and the tests' and children's logs) into `--out`, the same figures
into benchmarks/results/gpu_measure.json as one joined call (benchmarks/gpu_results.py; not in
a dry run), and prints a table. Exit status 0 when every step
passed, 1 otherwise, 2 without the wheels.

`--dry_run`: the same steps on this machine's CPU, the install left out, with tiny models and
shapes (the GPU tests skip): a check of everything but the GPU.

Only the Python standard library is imported here: this script runs before anything is
installed.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
WHEELS = ROOT / "benchmarks" / "gpu_wheels"
RESULTS = ROOT / "benchmarks" / "results" / "gpu_measure.json"
SITE = pathlib.Path(tempfile.gettempdir()) / "transformer_jax_gpu_site"
CACHE = pathlib.Path(tempfile.gettempdir()) / "transformer_jax_gpu_jit_cache"
CASES = ("base", "big", "gpt2_small", "bert_base", "vit_b16", "decoding")  # gpu_throughput's
# What --only picks from, in the order they run by default: the translation models' MFU first,
# then the tests, then the rest (a call cut short keeps what matters most).
STEPS = ("base", "big", "tests", "decoding", "gpt2_small", "bert_base", "vit_b16")
TESTS_BUDGET_S = 240  # At most this much of the budget for the GPU tests.
BUILD_WHEELS = (
    "python benchmarks/gpu_wheels.py (where the package index is reachable), then carry "
    "benchmarks/gpu_wheels to this machine"
)


class MissingWheels(RuntimeError):
    """The wheels folder or its manifest is absent."""


def install_wheels(wheels: pathlib.Path, site: pathlib.Path) -> dict:
    """Installs the manifest's wheels whose distribution is not installed into `site` (made
    afresh); the others are left to the machine's own. Checks each file's sha256 first.

    Returns:
      {"installed": [name==version, ...], "present": [name version (machine's), ...]}.

    Raises:
      MissingWheels: no manifest; RuntimeError: a wheel is absent, altered or refused.
    """
    manifest = wheels / "manifest.json"
    if not manifest.is_file():
        raise MissingWheels(f"{manifest} is missing")
    entries = json.loads(manifest.read_text())["wheels"]
    missing, present = [], []
    for entry in entries:
        try:
            present.append(f"{entry['name']} {importlib.metadata.version(entry['name'])}")
        except importlib.metadata.PackageNotFoundError:
            missing.append(entry)
    files = []
    for entry in missing:
        path = wheels / entry["file"]
        if not path.is_file():
            raise RuntimeError(f"{path} is missing: {BUILD_WHEELS}")
        if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
            raise RuntimeError(f"{path} differs from the manifest's: {BUILD_WHEELS}")
        files.append(str(path))
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    if files:
        cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
               "--disable-pip-version-check", "--quiet", "--target", str(site), *files]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            if "No module named pip" not in proc.stderr:
                raise RuntimeError(f"pip install failed:\n{proc.stderr[-2000:]}")
            for file in files:  # No pip: a wheel is a zip of what site-packages holds.
                with zipfile.ZipFile(file) as wheel:
                    wheel.extractall(site)
    installed = [f"{e['name']}=={e['version']}" for e in missing]
    return {"installed": installed, "present": present}


def child_env(site: pathlib.Path | None, dry_run: bool, *, shared: bool = False) -> dict[str, str]:
    """The environment of a child: the wheels and the repository importable; JAX on the GPU (or
    the CPU in a dry run), taking most of its memory at start, or, `shared` with the processes
    it starts (the tests' train.py), only what it uses."""
    env = dict(os.environ)
    paths = [str(site)] if site else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONUNBUFFERED"] = "1"
    if dry_run:
        env["JAX_PLATFORMS"] = "cpu"
        return env
    # tests/conftest.py pins the CPU and a fast-compile flag unless these are set: set them.
    env["JAX_PLATFORMS"] = "cuda"
    env["XLA_FLAGS"] = ""
    if shared:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    else:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "0.92"  # Room for the largest batches.
    env["JAX_COMPILATION_CACHE_DIR"] = str(CACHE)  # A second run on the machine skips compiles.
    return env


IMPORT_CHECK = """
import importlib.metadata as md, json, jax, ml_collections, grain, pytest, transformer_jax
from configs import wmt14_en_de_base
names = ("jaxlib", "flax", "optax", "orbax-checkpoint", "chex", "numpy", "grain")
print(json.dumps({"jax": jax.__version__, "backend": jax.default_backend(),
                  "devices": [d.device_kind for d in jax.devices()],
                  "versions": {n: md.version(n) for n in names}}))
"""


def run_logged(cmd: list[str], env: dict, log: pathlib.Path, timeout: float):
    """Runs `cmd` from the repository root, stdout and stderr appended to `log`.

    Returns:
      (exit status, or None when it ran past `timeout` and was killed).
    """
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        try:
            return subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=max(timeout, 1)).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            return None


def tail(path: pathlib.Path, chars: int = 1500) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def junit_summary(path: pathlib.Path) -> dict:
    """Counts of passed, failed, skipped tests and each failure's name and message."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None:
            counts["failed"] += 1
            failures.append({"test": name, "message": (bad.get("message") or "")[:800]})
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return {**counts, "failures": failures}


def run_tests(env: dict, out: pathlib.Path, timeout: float) -> dict:
    xml = out / "gpu_tests.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "tests/gpu", "-p",
           "no:cacheprovider", f"--junitxml={xml}"]  # fmt: skip
    status = run_logged(cmd, env, out / "gpu_tests.log", timeout)
    if status is None:
        raise RuntimeError(f"the GPU tests ran past {timeout:.0f} s")
    if not xml.exists():
        log = tail(out / "gpu_tests.log")
        raise RuntimeError(f"pytest exited {status} without a report:\n{log}")
    summary = junit_summary(xml)
    if status or summary["failed"]:
        raise RuntimeError(json.dumps(summary))
    return summary


def run_throughput(cases, env, out: pathlib.Path, deadline: float, dry_run: bool, chip):
    """gpu_throughput.py over `cases`, started again without the case a crash ended in.

    Returns:
      (rows, the child's meta); a case it could not finish has an "error" row.
    """
    partial, log = out / "throughput.json", out / "throughput.log"
    rows, meta, pending = [], {}, list(cases)
    while pending:
        if deadline - time.monotonic() < 10:
            rows += [{"case": c, "error": "not run (out of time)"} for c in pending]
            break
        partial.unlink(missing_ok=True)
        cmd = [sys.executable, "benchmarks/gpu_throughput.py", f"--only={','.join(pending)}",
               f"--out={partial}"] + (["--dry_run"] if dry_run else []) + (
                   [f"--chip={chip}"] if chip else [])  # fmt: skip
        status = run_logged(cmd, env, log, deadline - time.monotonic())
        data = json.loads(partial.read_text()) if partial.exists() else {}  # Written whole.
        meta = data.get("meta", meta)
        rows += data.get("rows", [])
        done = {r["case"] for r in rows}
        running = data.get("running")
        if status == 0 and not running:
            pending = [c for c in pending if c not in done]
            break
        how = "ran out of time" if status is None else f"exit status {status}"
        if not data:
            how += f", before its first case; its log ends: {tail(log, 600)}"
        if running and running not in done:
            rows.append({"case": running, "error": f"the process ended in it ({how}): "
                         f"{tail(log, 800)}"})  # fmt: skip
            done.add(running)
        left = [c for c in pending if c not in done]
        if status is None or not running or left == pending:  # No time, or no progress.
            rows += [{"case": c, "error": f"not run ({how})"} for c in left]
            break
        pending = left
    return rows, meta


def groups(only: list[str]) -> list[list[str]]:
    """`only` cut into runs: ["tests"] alone, consecutive throughput cases together."""
    runs: list[list[str]] = []
    for name in only:
        if name != "tests" and runs and runs[-1] != ["tests"]:
            runs[-1].append(name)
        else:
            runs.append([name])
    return runs


def table(result: dict) -> str:
    """The steps and the measured rows as markdown."""
    lines = ["| step | result | seconds |", "|---|---|---|"]
    for step in result["steps"]:
        what = "ok" if step["ok"] else "FAILED: " + step["error"][-200:].replace("\n", " ")
        if step["name"] == "tests" and step.get("passed") is not None:
            what += f" ({step['passed']} passed, {step['skipped']} skipped)"
        lines.append(f"| {step['name']} | {what} | {step['seconds']:.0f} |")
    lines += ["", "| case | what | batch | compile | step or call | per second | MFU | attention |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in result["rows"]:
        if "error" in r:
            error = r["error"][:120].replace("\n", " ")
            lines.append(f"| {r['case']} | error: {error} | | | | | | |")
            continue
        ms = r.get("step_ms", r.get("ms_per_call"))
        mfu = f"{100 * r['mfu']:.3g}% ({r['mfu_source']})" if r.get("mfu") is not None else ""
        lines.append(
            f"| {r['case']} | {r['kind']} | {r['batch']} | {r['compile_s']:.0f} s | {ms:,.1f} ms "
            f"| {r['items_per_s']:,.0f} {r['unit']}s | {mfu} | {r.get('attention', '')} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="Folder for the JSON and logs ($OUT).")
    parser.add_argument("--only", default=",".join(STEPS), help=f"Comma list of {STEPS}.")
    parser.add_argument("--dry_run", action="store_true", help="On this CPU, tiny, no install.")
    parser.add_argument("--budget_s", type=float, default=480.0, help="Seconds for everything.")
    parser.add_argument("--wheels", default=str(WHEELS), help="The folder gpu_wheels.py fills.")
    parser.add_argument("--chip", help="Peak for the MFU: a key of aot.targets.CHIPS.")
    args = parser.parse_args()
    deadline = time.monotonic() + args.budget_s
    only = [c for c in args.only.split(",") if c]
    if set(only) - set(STEPS):
        parser.error(f"--only: unknown {sorted(set(only) - set(STEPS))}; known: {STEPS}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {
        "meta": {"command": " ".join(["python3", *sys.argv]), "dry_run": args.dry_run,
                 "python": platform.python_version(),
                 "machine": platform.machine(), "cpu_count": os.cpu_count(),
                 "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "budget_s": args.budget_s},
        "steps": [],
        "rows": [],
    }  # fmt: skip
    site = None

    def step(name, fn):
        started = time.monotonic()
        record = {"name": name}
        print(f"[gpu_measure] {name} ...", flush=True)
        try:
            record.update(fn() or {}, ok=True)
        except Exception as e:  # Recorded; the next step runs.
            record.update(ok=False, error=f"{type(e).__name__}: {e}")
        record["seconds"] = round(time.monotonic() - started, 1)
        result["steps"].append(record)
        print(f"[gpu_measure] {name}: {'ok' if record['ok'] else record['error'][:2000]}",
              flush=True)  # fmt: skip
        return record["ok"]

    if not args.dry_run:
        manifest = pathlib.Path(args.wheels) / "manifest.json"
        if not manifest.is_file():
            print(f"{manifest} is missing: build the wheels with {BUILD_WHEELS}.", flush=True)
            return 2
        site = SITE
        step("install", lambda: install_wheels(pathlib.Path(args.wheels), SITE))
    env = child_env(site, args.dry_run)

    def imports():
        proc = subprocess.run([sys.executable, "-c", IMPORT_CHECK], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        if proc.returncode:
            raise RuntimeError(proc.stderr[-2000:])
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        if not args.dry_run and found["backend"] != "gpu":
            raise RuntimeError(f"JAX does not see a GPU: {found}")
        return found

    step("imports", imports)

    def throughput(group):
        rows, meta = run_throughput(group, env, out, deadline, args.dry_run, args.chip)
        result["rows"] += rows
        result["meta"]["device"] = meta or result["meta"].get("device", {})
        failed = [r["case"] for r in rows if "error" in r]
        if failed:
            raise RuntimeError(f"failed: {', '.join(failed)}")

    for group in groups(only):  # In --only's order; consecutive cases share one child.
        if group == ["tests"]:
            budget = min(TESTS_BUDGET_S, deadline - time.monotonic())
            tests_env = child_env(site, args.dry_run, shared=True)
            step("tests", lambda e=tests_env, b=budget: run_tests(e, out, b))
        else:
            step("throughput " + ",".join(group), lambda g=group: throughput(g))
    result["meta"]["seconds"] = round(args.budget_s - (deadline - time.monotonic()), 1)
    text = json.dumps(result, indent=1) + "\n"
    (out / "gpu_measure.json").write_text(text)
    if not args.dry_run:
        # The layout of a joined file (gpu_results.py), which the documents' figures read.
        sys.path.insert(0, str(ROOT))
        from benchmarks.gpu_results import join

        RESULTS.write_text(json.dumps(join([result]), indent=1) + "\n")
    report = table(result)
    (out / "gpu_measure.md").write_text(report + "\n")
    print(report, flush=True)
    return 0 if all(s["ok"] for s in result["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
