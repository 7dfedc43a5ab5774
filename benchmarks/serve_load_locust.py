"""The clients of benchmarks/serve_load.py: a locust file (run by `locust`, never imported).

    locust -f benchmarks/serve_load_locust.py --headless --host=http://127.0.0.1:PORT \
        --users=32 --spawn-rate=32 --run-time=30s --json-file=out \
        --workload=translation --inputs=inputs.json

Each simulated user is a closed-loop client: it sends its next request as soon as the last one
is answered (no think time), so N users keep N requests in flight. The requests' inputs come
from --inputs (written by serve_load.py) and are taken in turn by all users. Workloads:

    translation  POST /v1/translate {"text": one English number phrase} (the server's beam)
    translation_beam4  the same with "beam_size": 4
    gpt          POST /v1/completions {"prompt", "max_tokens", "temperature": 0}
    gpt_stream   the same with "stream": true; a second entry, "first token", holds the time
                 from sending the request to its first text event
    embeddings   POST /v1/embeddings {"input": one sentence}
    mixed        the three models in turn (translation alternately through LibreTranslate's
                 POST /translate), until --total requests have been sent

A request counts as failed unless it is answered 200 with the fields a client reads. Each
entry's content length is what it produced: sentences, tokens, vectors. At exit the file named
by --report receives the requests sent, the seconds from the stats' reset (all users started)
to the stop, and the errors by message.
"""

from __future__ import annotations

import itertools
import json
import time

import gevent
from locust import FastHttpUser, constant, events, task
from locust.exception import StopUser

FIRST_TOKEN = "first token"  # The name of the time-to-first-token entry.
WORKLOADS = ("translation", "translation_beam4", "gpt", "gpt_stream", "embeddings", "mixed")

_inputs: dict = {}
_turn = itertools.count()  # Whose turn among the inputs (all users share it).
_sent = [0]
_window: dict = {}  # When the counted part of the run began (stats reset) and ended.


@events.init_command_line_parser.add_listener
def _options(parser):
    parser.add_argument("--workload", choices=WORKLOADS, default="translation")
    parser.add_argument("--inputs", default="", help="JSON file of inputs (serve_load.py)")
    parser.add_argument("--total", type=int, default=0, help="mixed: requests to send")
    parser.add_argument("--report", default="", help="JSON file for requests sent and errors")


@events.init.add_listener
def _load_inputs(environment, **_):
    if environment.parsed_options and environment.parsed_options.inputs:
        with open(environment.parsed_options.inputs, encoding="utf-8") as f:
            _inputs.update(json.load(f))


@events.spawning_complete.add_listener
def _window_starts(**_):
    _window["start"] = time.monotonic()  # --reset-stats clears the stats now.


@events.test_stopping.add_listener
def _window_ends(**_):
    _window.setdefault("end", time.monotonic())  # Before the users are stopped.


@events.quitting.add_listener
def _write_report(environment, **_):
    path = environment.parsed_options.report if environment.parsed_options else ""
    if path:
        errors = {
            key: {"error": e["error"], "name": e["name"], "occurrences": e["occurrences"]}
            for key, e in environment.runner.stats.serialize_errors().items()
        }
        end = _window.get("end", time.monotonic())
        report = {"sent": _sent[0], "seconds": end - _window.get("start", end), "errors": errors}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(report, f)


def _next(kind: str) -> str:
    items = _inputs[kind]
    return items[next(_turn) % len(items)]


class Client(FastHttpUser):
    """One closed-loop client of the workload chosen by --workload."""

    wait_time = constant(0)
    network_timeout = 300.0
    connection_timeout = 60.0

    @task
    def one_request(self):
        workload = self.environment.parsed_options.workload
        if workload == "mixed":
            total = self.environment.parsed_options.total
            if _sent[0] >= total:
                raise StopUser()
            i = _sent[0]
            workload = ("translation", "gpt", "embeddings", "libretranslate", "gpt", "embeddings")[
                i % 6
            ]
        _sent[0] += 1
        getattr(self, workload)()
        if self.environment.parsed_options.workload == "mixed":
            stats = self.environment.runner.stats.total
            if stats.num_requests >= self.environment.parsed_options.total:
                gevent.spawn(self.environment.runner.quit)  # Not from inside this user.

    def translation(self):
        text = _next("translation")
        with self.client.post(
            "/v1/translate", json={"text": text}, name="translation", catch_response=True
        ) as r:
            _check(r, lambda body: isinstance(body.get("translation"), str), 1)

    def translation_beam4(self):
        request = {"text": _next("translation"), "beam_size": 4}
        with self.client.post(
            "/v1/translate", json=request, name="translation beam 4", catch_response=True
        ) as r:
            _check(r, lambda body: isinstance(body.get("translation"), str), 1)

    def libretranslate(self):
        text = _next("translation")
        form = {"q": text, "source": "en", "target": _inputs["target"]}
        with self.client.post(
            "/translate", data=form, name="libretranslate", catch_response=True
        ) as r:
            _check(r, lambda body: isinstance(body.get("translatedText"), str), 1)

    def embeddings(self):
        with self.client.post(
            "/v1/embeddings", json={"input": _next("embeddings")}, name="embeddings",
            catch_response=True,
        ) as r:  # fmt: skip
            _check(r, lambda body: len(body["data"][0]["embedding"]) > 0, 1)

    def gpt(self):
        request = {"prompt": _next("gpt"), "max_tokens": _inputs["max_tokens"], "temperature": 0}
        with self.client.post(
            "/v1/completions", json=request, name="completion", catch_response=True
        ) as r:
            tokens = _check(r, lambda body: body["usage"]["completion_tokens"], None)
            if tokens:
                r.request_meta["response_length"] = tokens

    def gpt_stream(self):
        request = {
            "prompt": _next("gpt"), "max_tokens": _inputs["max_tokens"], "temperature": 0,
            "stream": True,
        }  # fmt: skip
        start = time.perf_counter()
        with self.client.post(
            "/v1/completions", json=request, name="completion stream", stream=True,
            catch_response=True,
        ) as r:  # fmt: skip
            if r.status_code != 200:
                r.failure(f"HTTP {r.status_code}")
                return
            first, events_seen, finish = None, 0, None
            # Line by line as the events arrive: the response's read(n) (and so iter_content)
            # waits for n bytes, which would hold the first events back.
            body = r._response
            while line := body.readline(b"\n").decode("utf-8"):
                if not line.startswith("data: ") or line.strip() == "data: [DONE]":
                    continue
                event = json.loads(line[len("data: ") :])
                if "error" in event:
                    r.failure(f"stream error: {event['error'].get('message')}")
                    return
                choice = event["choices"][0]
                if choice["text"] and first is None:
                    first = time.perf_counter()
                    self.environment.events.request.fire(
                        request_type="SSE", name=FIRST_TOKEN,
                        response_time=(first - start) * 1000, response_length=0,
                        exception=None, context={},
                    )  # fmt: skip
                events_seen += bool(choice["text"])
                finish = choice["finish_reason"] or finish
            r.request_meta["response_time"] = (time.perf_counter() - start) * 1000
            r.request_meta["response_length"] = events_seen
            if finish is None:
                r.failure("the stream ended without a finish_reason")
            else:
                r.success()


def _check(r, read, length):
    """Marks `r` failed unless it is a 200 whose JSON `read` accepts; returns what `read`
    gave, and records `length` (or that value) as the entry's content length."""
    if r.status_code != 200:
        r.failure(f"HTTP {r.status_code}: {(r.text or '')[:200]}")
        return None
    try:
        value = read(r.json())
    except (ValueError, KeyError, IndexError, TypeError) as e:
        r.failure(f"unreadable answer ({type(e).__name__}: {e})")
        return None
    if not value:
        r.failure("the answer lacks what a client reads")
        return None
    r.request_meta["response_length"] = length if length is not None else value
    r.success()
    return value
