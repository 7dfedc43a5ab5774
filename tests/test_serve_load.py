"""benchmarks/serve_load.py's CPU-cheap parts: its arguments, the one line it ends with when
something is missing, the figures it computes from locust's entries and the server's metrics,
and the JSON and table it writes. No server starts and nothing trains."""

import json
import math

import pytest

from benchmarks import serve_load as sl


def _entry(times_ms: dict, units_per_request: int = 1, failures: int = 0):
    """A locust stats entry (as its --json-file writes it) of `times_ms` {ms: count}."""
    requests = sum(times_ms.values())
    return {
        "name": "x", "num_requests": requests, "num_failures": failures,
        "total_response_time": sum(int(ms) * n for ms, n in times_ms.items()),
        "max_response_time": max(int(ms) for ms in times_ms),
        "total_content_length": units_per_request * (requests - failures),
        "response_times": {str(ms): n for ms, n in times_ms.items()},  # JSON keys: strings
    }  # fmt: skip


def _results(scale: float, tail: float, first_token: float, compiled: int = 0) -> dict:
    """Results of three models whose 32-client throughput is `scale` times the one-client
    throughput, whose 32-client p99 is `tail` times their p50, and whose 16-stream first token
    takes `first_token` times the one-stream one."""
    models = {}
    for model in sl.MODELS:
        unit = 32 if model.unit == "tokens" else 1
        one = sl.point(_entry({100: 100}, unit), 1, model.unit, 10.0)
        many = sl.point(_entry({100: 98 * scale, int(100 * tail): 2 * scale}, unit),
                        32, model.unit, 10.0)  # fmt: skip
        models[model.key] = {"unit": model.unit, "clients": {"1": one, "32": many}}
    streams = models["gpt"]["streams"] = {}
    for clients, ms in ((1, 50.0), (16, 50.0 * first_token)):
        streams[str(clients)] = sl.point(_entry({200: 10}, 32), clients, "tokens", 2.0)
        streams[str(clients)]["first_token_p50_ms"] = ms
    return {
        "models": models,
        "compilations": {"after_warmup": 40, "after_load": 40 + compiled},
        "mixed": {"clients": 32, "sent": 300, "recorded": 300, "failures": 0, "lost": 0,
                  "server_answered": 300, "seconds": 6.0, "requests_per_s": 50.0,
                  "compilations": 0},
    }  # fmt: skip


def test_arguments_and_quick_mode():
    args = sl.parse_args([])
    assert args.clients == (1, 8, 32, 128) and args.seconds == 30 and args.mixed_requests == 10_000
    assert args.out == str(sl.RESULTS) and args.translation == "runs/default"
    quick = sl.parse_args(["--quick", "--clients=1,32", "--gpt=/x/gpt"])
    assert quick.seconds < 10 and quick.mixed_requests < 1000 and quick.clients == (1, 32)
    assert quick.out != str(sl.RESULTS), "a smoke test must not overwrite the recorded figures"
    assert quick.gpt == "/x/gpt"
    with pytest.raises(SystemExit):
        sl.parse_args(["--clients=0"])


def test_a_missing_tool_or_workdir_is_one_line_with_its_command(tmp_path):
    dirs = {m.key: tmp_path / m.key for m in sl.MODELS}
    args = sl.parse_args([f"--{k}={d}" for k, d in dirs.items()])
    no_locust = sl.missing(args, find_spec=lambda name: None if name == "locust" else object())
    assert no_locust == "serve_load: locust is not installed: pip install -e '.[bench]'"
    everything = lambda name: object()  # noqa: E731
    line = sl.missing(args, find_spec=everything)
    assert "\n" not in line and f"--workdir={dirs['translation']}" in line
    assert "configs/default.py" in line
    for key in ("translation", "gpt"):
        dirs[key].mkdir()
        (dirs[key] / "config.json").write_text("{}")
    line = sl.missing(args, find_spec=everything)
    assert "convert --from_hf=" in line and f"--workdir={dirs['embeddings']}" in line
    dirs["embeddings"].mkdir()
    (dirs["embeddings"] / "config.json").write_text("{}")
    assert sl.missing(args, find_spec=everything) is None


def test_percentiles_and_a_point_from_a_locust_entry():
    histogram = {"10": 50, "20": 40, "90": 9, "400": 1}
    assert sl.percentile(histogram, 0.5) == 10 and sl.percentile(histogram, 0.9) == 20
    assert sl.percentile(histogram, 0.99) == 90 and sl.percentile(histogram, 1.0) == 400
    assert math.isnan(sl.percentile({}, 0.5))
    found = sl.point(_entry({10: 50, 20: 40, 90: 9, 400: 1}, 3, failures=4), 8, "tokens", 4.0)
    assert found["clients"] == 8 and found["requests"] == 100 and found["failures"] == 4
    assert found["requests_per_s"] == pytest.approx(96 / 4)  # answered ones only
    assert found["tokens_per_s"] == pytest.approx(3 * 96 / 4)
    assert (found["p50_ms"], found["p99_ms"], found["max_ms"]) == (10, 90, 400)


def test_server_deltas_from_two_scrapes():
    def scrape(batches, size_sum, seconds, compiled, ok):
        return sl.parse_metrics(
            "# TYPE transformer_jax_batch_size histogram\n"
            f'transformer_jax_batch_size_count{{model="translation"}} {batches}\n'
            f'transformer_jax_batch_size_sum{{model="translation"}} {size_sum}\n'
            f'transformer_jax_batch_size_count{{model="gpt"}} 99\n'
            "# TYPE transformer_jax_batch_seconds histogram\n"
            f'transformer_jax_batch_seconds_count{{model="translation"}} {batches}\n'
            f'transformer_jax_batch_seconds_sum{{model="translation"}} {seconds}\n'
            "# TYPE transformer_jax_xla_compilations_total counter\n"
            f"transformer_jax_xla_compilations_total {compiled}\n"
            "# TYPE transformer_jax_requests_total counter\n"
            f'transformer_jax_requests_total{{model="translation",endpoint="/v1/translate",'
            f'status="200"}} {ok}\n'
            'transformer_jax_requests_total{model="translation",endpoint="/translate",'
            'status="503"} 7\n'
        )

    delta = sl.server_delta(scrape(3, 10, 0.5, 41, 10), scrape(13, 250, 2.5, 41, 250),
                            "translation")  # fmt: skip
    assert delta == {"compilations": 0, "answers_200": 240, "batches": 10, "mean_batch": 24.0,
                     "mean_batch_ms": pytest.approx(200.0), "batch_seconds": 2.0}  # fmt: skip


def test_server_latency_quantiles_from_histogram_deltas():
    # Cumulative counts: 100 answers before, then 60 under 10 ms, 30 more under 50 ms, 10 more
    # under 250 ms; PromQL interpolates within the bucket.
    assert sl.histogram_quantile(0.5, {0.01: 60, 0.05: 90, 0.25: 100, float("inf"): 100}) == (
        pytest.approx(0.01 * 50 / 60))  # fmt: skip
    assert sl.histogram_quantile(0.99, {0.01: 60, 0.05: 90, 0.25: 100, float("inf"): 100}) == (
        pytest.approx(0.05 + 0.2 * 9 / 10))  # fmt: skip
    assert sl.histogram_quantile(0.99, {0.1: 1, float("inf"): 2}) == 0.1  # past the top

    def scrape(under_10ms, under_50ms, total):
        rows = "".join(
            f'transformer_jax_request_seconds_bucket{{endpoint="/v1/embeddings",le="{le}",'
            f'model="embeddings"}} {n}\n'
            for le, n in (("0.01", under_10ms), ("0.05", under_50ms), ("+Inf", total))
        )
        return sl.parse_metrics("# TYPE transformer_jax_request_seconds histogram\n" + rows)

    delta = sl.server_delta(scrape(5, 5, 5), scrape(65, 105, 105), "embeddings")
    assert delta["latency_p50_ms"] == pytest.approx(10 * 50 / 60)
    assert delta["latency_p99_ms"] == pytest.approx(10 + 40 * 39 / 40)
    assert "first_token_p50_ms" not in delta


@pytest.mark.parametrize(
    "scale, tail, first_token, compiled, failing",
    [
        (10.0, 1.5, 2.0, 0, set()),
        (5.5, 1.5, 2.0, 0, {"translation_scaling", "embeddings_scaling"}),
        (10.0, 2.5, 3.5, 1, {"translation_tail", "gpt_tail", "embeddings_tail", "first_token",
                             "compilations"}),
    ],
)  # fmt: skip
def test_the_figures_to_reach_are_computed_and_judged(scale, tail, first_token, compiled,
                                                      failing):  # fmt: skip
    got = sl.targets(_results(scale, tail, first_token, compiled))
    assert set(got) == {name for name, *_ in sl.TARGETS}
    assert {name for name, t in got.items() if not t["pass"]} == failing
    assert got["translation_scaling"]["value"] == pytest.approx(scale)
    assert got["gpt_scaling"]["value"] == pytest.approx(scale)
    assert got["first_token"]["value"] == pytest.approx(first_token)
    assert got["compilations"]["value"] == compiled


def test_a_missing_point_is_not_measured_rather_than_passed():
    results = _results(10.0, 1.5, 2.0)
    del results["models"]["embeddings"]["clients"]["32"]
    del results["mixed"]
    got = sl.targets(results)
    assert got["embeddings_scaling"]["pass"] is None and got["embeddings_tail"]["value"] is None
    assert got["mixed_lost"]["pass"] is None and got["translation_scaling"]["pass"] is True


def test_the_json_and_the_table(tmp_path):
    results = _results(5.5, 1.5, 2.0)
    results["models"]["gpt"]["clients"]["32"]["server"] = {"mean_batch": 30.5, "compilations": 0}
    out = tmp_path / "deep" / "serve_load.json"
    text = sl.finish(results, out)
    written = json.loads(out.read_text())
    assert written["passed"] is False
    assert written["targets"]["translation_scaling"]["target"] == ">= 6"
    assert written["models"]["gpt"]["clients"]["32"]["tokens_per_s"] == pytest.approx(
        5.5 * 100 * 32 / 10)  # fmt: skip
    rows = text.splitlines()
    assert rows[0].split()[:3] == ["model", "clients", "req/s"]
    gpt32 = next(r for r in rows if r.startswith("gpt ") and r.split()[1] == "32")
    assert gpt32.split()[1:4] == ["32", "55.0", "1760.0"] and "30.5" in gpt32
    assert any(r.startswith("gpt stream") and r.split()[2] == "16" for r in rows)
    assert any(r.startswith("FAIL") and "translation: requests/s at 32" in r for r in rows)
    assert any(r.startswith("mixed: 300 requests at 32 clients") for r in rows)
