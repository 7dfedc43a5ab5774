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

`--ablate` measures the levers of the train step instead, one at a time against each model's
default (after the install, no tests):

    python3 benchmarks/gpu_measure.py --ablate --out=$OUT

ABLATION below lists its cases in the order they run (most valuable first) with each one's
time limit; each case is a gpu_throughput.py child of its own (`--lever`, XLA_FLAGS or
`--profile_steps`), so a failure or a hang costs one row. Within `--budget_s` (540 s by
default) the list is cut at the first case whose limit no longer fits, and the cut is
recorded (`--cases` runs the rest in another call). Writes ablation.json (a row per case:
levers, step time, items per second, MFU, attention, ok or error, seconds) and ablation.md
(`ablation_table`, the table docs/performance.md shows) into `--out`, and on a GPU the JSON
into benchmarks/results/gpu_ablation.json too. Without a GPU it says so in one line and exits
2, before anything is installed or started; `--ablate --dry_run` runs the cases with tiny
models on the CPU.

Only the Python standard library is imported here: this script runs before anything is
installed.
"""

from __future__ import annotations

import argparse
import glob
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
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
WHEELS = ROOT / "benchmarks" / "gpu_wheels"
RESULTS = ROOT / "benchmarks" / "results" / "gpu_measure.json"
ABLATION_RESULTS = ROOT / "benchmarks" / "results" / "gpu_ablation.json"
SITE = pathlib.Path(tempfile.gettempdir()) / "transformer_jax_gpu_site"
CACHE = pathlib.Path(tempfile.gettempdir()) / "transformer_jax_gpu_jit_cache"
CASES = ("base", "big", "gpt2_small", "bert_base", "vit_b16", "decoding")  # gpu_throughput's
# What --only picks from, in the order they run by default: the translation models' MFU first,
# then the tests, then the rest (a call cut short keeps what matters most).
STEPS = ("base", "big", "tests", "decoding", "gpt2_small", "bert_base", "vit_b16")
TESTS_BUDGET_S = 240  # At most this much of the budget for the GPU tests.


class Ablation(NamedTuple):
    """One case of --ablate: a train step of gpu_throughput.py's `model` with one lever."""

    model: str  # A train case of gpu_throughput.py.
    lever: str  # What the case changes, as the table shows it ("default": nothing).
    limit_s: int  # Seconds the child may take: start, compile (22-47 s on an H200), steps.
    levers: tuple[str, ...] = ()  # gpu_throughput.py --lever NAME=VALUE.
    xla_flags: str = ""  # The child's XLA_FLAGS ("": XLA's defaults).
    profile_steps: int = 0  # Train steps traced after the timed ones (--profile_steps).

    @property
    def name(self) -> str:  # What --cases names it by.
        return f"{self.model}:{self.lever}"

    def row(self, **fields) -> dict:
        """A row of ablation.json for this case: its name, model, lever and levers, `fields`."""
        levers = dict(lever.split("=", 1) for lever in self.levers)
        if self.xla_flags:
            levers["xla_flags"] = self.xla_flags
        return {"case": self.name, "model": self.model, "lever": self.lever, "levers": levers,
                **fields}  # fmt: skip


def _lever(model: str, lever: str, limit_s: int) -> Ablation:
    return Ablation(model, lever, limit_s, levers=(lever,))


def _xla(model: str, lever: str, limit_s: int, flags: str) -> Ablation:
    return Ablation(model, lever, limit_s, xla_flags=flags)


# --ablate's cases in the order they run, most valuable first, so that a call its budget cuts
# short keeps what matters most: GPT-2 small first, the lowest MFU measured (16%) and the most
# levers open, its attention newly on cuDNN's kernel (no attention dropout in its config);
# BERT-base next, the same attention change on an encoder; then the translation models, whose
# defaults were measured before; ViT-B/16; last a trace of GPT-2 small's step, whose program
# the compilation cache holds by then. Each model's default comes before its levers, which
# are read against it. The generators of dropout bits are measured on BERT-base, whose
# residuals keep dropout 0.1 (GPT-2 small pretrains without dropout: it draws no bits). The
# limits: a child's start, one compile, 12 steps, with room.
ABLATION = (
    Ablation("gpt2_small", "default", 90),
    _lever("gpt2_small", "attention_dropout=0.1", 90),
    _lever("gpt2_small", "head=f32", 90),
    _xla("gpt2_small", "triton_gemm=off", 90, "--xla_gpu_enable_triton_gemm=false"),
    _xla("gpt2_small", "command_buffer=off", 90, "--xla_gpu_enable_command_buffer="),
    _lever("gpt2_small", "rows=8", 75),
    Ablation("bert_base", "default", 75),
    _lever("bert_base", "attention_dropout=0.1", 75),
    _lever("bert_base", "head=f32", 75),
    _lever("bert_base", "rng=rbg", 75),
    _lever("bert_base", "rng=unsafe_rbg", 75),
    Ablation("base", "default", 75),
    _lever("base", "head=f32", 75),
    Ablation("big", "default", 90),
    _lever("big", "head=f32", 90),
    Ablation("vit_b16", "default", 75),
    Ablation("gpt2_small", "profile", 90, profile_steps=3),
)
LEFT_OUT = "not run (out of time)"
ABLATE_BUDGET_S = 540  # --ablate's default --budget_s: 9 of a lent machine's 15 minutes.
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


def has_gpu() -> bool:
    """Whether this machine shows an NVIDIA GPU: its driver's device files or nvidia-smi."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or shutil.which("nvidia-smi") is not None


def run_ablation_case(case: Ablation, env: dict, out: pathlib.Path, timeout: float,
                      dry_run: bool, chip) -> tuple[dict, dict]:  # fmt: skip
    """`case` in a gpu_throughput.py child of its own, killed after `timeout` seconds.

    Returns:
      (its row: the case, its model, lever and levers, `ok`, the child's figures or an
      "error"; the child's meta, {} when it wrote none).
    """
    partial = out / "ablation" / (case.name.replace(":", "-").replace("=", "-") + ".json")
    partial.parent.mkdir(exist_ok=True)
    partial.unlink(missing_ok=True)
    cmd = [sys.executable, "benchmarks/gpu_throughput.py", f"--only={case.model}",
           f"--out={partial}", *(f"--lever={lever}" for lever in case.levers)]  # fmt: skip
    cmd += ["--dry_run"] if dry_run else []
    cmd += [f"--chip={chip}"] if chip else []
    if case.profile_steps:
        cmd += [f"--profile_steps={case.profile_steps}", f"--profile_dir={out / 'profile'}"]
    if case.xla_flags:  # Besides the flags the environment holds (none on the GPU machine).
        env = {**env, "XLA_FLAGS": f"{env.get('XLA_FLAGS', '')} {case.xla_flags}".strip()}
    log = out / "ablation.log"
    started = time.monotonic()
    status = run_logged(cmd, env, log, timeout)
    data = json.loads(partial.read_text()) if partial.exists() else {}  # Written whole.
    child = next(iter(data.get("rows", [])), {})
    row = {**child, **case.row(ok=status == 0 and bool(child) and "error" not in child)}
    if not row["ok"]:
        how = f"ran past its limit of {timeout:.0f} s" if status is None else f"exit {status}"
        row["error"] = child.get("error") or f"{how}; its log ends: {tail(log, 800)}"
    row["seconds"] = round(time.monotonic() - started, 1)
    return row, data.get("meta", {})


def run_ablation(cases, env: dict, out: pathlib.Path, deadline: float, dry_run: bool, chip,
                 save=lambda rows, meta: None) -> tuple[list[dict], dict]:  # fmt: skip
    """`cases` in order, each within its limit, until the time left before `deadline` is less
    than the next one's limit: that case and those after it are left out (a row each, not ok).
    `save(rows, meta)` is called after each case.

    Returns:
      (a row per case, in order; the last child's meta).
    """
    rows, meta = [], {}
    for index, case in enumerate(cases):
        if deadline - time.monotonic() < case.limit_s:
            rows += [c.row(ok=False, error=LEFT_OUT) for c in cases[index:]]
            break
        print(f"[gpu_measure] {case.name} ...", flush=True)
        row, meta = run_ablation_case(case, env, out, case.limit_s, dry_run, chip)
        meta = meta or {}
        rows.append(row)
        print(f"[gpu_measure] {case.name}: {'ok' if row['ok'] else row['error'][:500]}",
              flush=True)  # fmt: skip
        save(rows, meta)
    save(rows, meta)
    return rows, meta


def _percent(value) -> str:
    return "" if value is None else f"{100 * value:.1f}%"


def ablation_table(result: dict) -> str:
    """The rows of `result` (an ablation.json) as the markdown table docs/performance.md shows:
    model, lever, items per second, MFU, the change in items per second against the model's
    default row, the attention the step ran."""
    lines = ["| model | lever | per second | MFU | change | attention |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    defaults = {r["model"]: r for r in result["rows"] if r["lever"] == "default" and r["ok"]}
    for r in result["rows"]:
        if not r["ok"]:
            error = r["error"][:100].replace("\n", " ").replace("|", "/")
            lines.append(f"| {r['model']} | {r['lever']} | not measured: {error} | | | |")
            continue
        default = defaults.get(r["model"])
        if r["lever"] == "default":
            change = "reference"
        elif default:
            change = f"{r['items_per_s'] / default['items_per_s'] - 1:+.1%}"
        else:
            change = "(no default row)"
        lines.append(
            f"| {r['model']} | {r['lever']} | {r['items_per_s']:,.0f} {r['unit']}s "
            f"| {_percent(r.get('mfu'))} | {change} | {r.get('attention', '')} |"
        )
    return "\n".join(lines)


def ablate(args, out: pathlib.Path) -> int:
    """--ablate: the install, then ABLATION's cases (or --cases'), ablation.json and .md."""
    if not args.dry_run and not has_gpu():
        print("No GPU here (no /dev/nvidia*, no nvidia-smi): --ablate measures on a GPU "
              "machine; `--ablate --dry_run` runs its cases with tiny models on this CPU.",
              flush=True)  # fmt: skip
        return 2
    wanted = [c for c in args.cases.split(",") if c] if args.cases else None
    cases = [c for c in ABLATION if wanted is None or c.name in wanted]  # ABLATION's order.
    budget = ABLATE_BUDGET_S if args.budget_s is None else args.budget_s
    deadline = time.monotonic() + budget
    out.mkdir(parents=True, exist_ok=True)
    result = {"meta": {"command": " ".join(["python3", *sys.argv]), "dry_run": args.dry_run,
                       "started": time.strftime("%Y-%m-%d %H:%M:%S %z"), "budget_s": budget},
              "rows": []}  # fmt: skip
    site = None
    if not args.dry_run:
        if missing := wheels_missing(pathlib.Path(args.wheels)):
            print(missing, flush=True)
            return 2
        site = SITE
        try:
            result["meta"]["install"] = install_wheels(pathlib.Path(args.wheels), SITE)
        except Exception as e:  # Recorded; each case then says what it could not import.
            result["meta"]["install"] = {"error": f"{type(e).__name__}: {e}"}

    def save(rows, meta):
        result["rows"] = rows
        meta = {k: v for k, v in meta.items() if k != "xla_flags"}  # A case's, in its row.
        result["meta"]["device"] = meta or result["meta"].get("device", {})
        left = [r["case"] for r in rows if r.get("error") == LEFT_OUT]
        result["meta"]["left_out"] = left
        result["meta"]["seconds"] = round(budget - (deadline - time.monotonic()), 1)
        (out / "ablation.json").write_text(json.dumps(result, indent=1) + "\n")

    rows, _ = run_ablation(cases, child_env(site, args.dry_run), out, deadline, args.dry_run,
                           args.chip, save)  # fmt: skip
    if not args.dry_run and any(r["ok"] for r in rows):
        ABLATION_RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    report = ablation_table(result)
    (out / "ablation.md").write_text(report + "\n")
    print(report, flush=True)
    if result["meta"]["left_out"]:
        print(f"Left out for lack of time: --cases={','.join(result['meta']['left_out'])}")
    return 0 if all(r["ok"] for r in rows) else 1


def wheels_missing(wheels: pathlib.Path) -> str | None:
    """What to do when `wheels` has no manifest (None when it has one)."""
    manifest = wheels / "manifest.json"
    if manifest.is_file():
        return None
    return f"{manifest} is missing: build the wheels with {BUILD_WHEELS}."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="Folder for the JSON and logs ($OUT).")
    parser.add_argument("--only", default=",".join(STEPS), help=f"Comma list of {STEPS}.")
    parser.add_argument("--dry_run", action="store_true", help="On this CPU, tiny, no install.")
    parser.add_argument("--budget_s", type=float, help="Seconds for everything (default: 480, "
                        f"with --ablate {ABLATE_BUDGET_S}).")  # fmt: skip
    parser.add_argument("--wheels", default=str(WHEELS), help="The folder gpu_wheels.py fills.")
    parser.add_argument("--chip", help="Peak for the MFU: a key of aot.targets.CHIPS.")
    parser.add_argument("--ablate", action="store_true", help="The levers' cases (ABLATION).")
    parser.add_argument("--cases", help="With --ablate: a comma list of ABLATION's names.")
    args = parser.parse_args()
    names = [c.name for c in ABLATION]
    unknown = sorted(set((args.cases or "").split(",")) - set(names) - {""})
    if unknown:
        parser.error(f"--cases: unknown {unknown}; known: {', '.join(names)}")
    if args.cases and not args.ablate:
        parser.error("--cases picks among --ablate's cases: give --ablate too")
    if args.ablate:
        return ablate(args, pathlib.Path(args.out))
    args.budget_s = 480.0 if args.budget_s is None else args.budget_s
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
        if missing := wheels_missing(pathlib.Path(args.wheels)):
            print(missing, flush=True)
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
