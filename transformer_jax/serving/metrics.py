"""Prometheus metrics of one server, on its own registry (`GET /metrics`).

    transformer_jax_requests_total{model, endpoint, status}   answers sent, by HTTP status
    transformer_jax_request_seconds{model, endpoint}          latency histogram
    transformer_jax_queue_depth{model}                        requests waiting for a batch
    transformer_jax_batch_size{model}                         requests per batch (histogram)
    transformer_jax_batch_seconds{model}                      time per batch (histogram)
    transformer_jax_generated_tokens_total{model}             tokens produced (rate() = tokens/s)
    transformer_jax_time_to_first_token_seconds{model}        streaming latency (histogram)
    transformer_jax_active_slots{model}                       GPT slots decoding
    transformer_jax_completions_ended_total{model, reason}    GPT requests leaving their slot:
                                                              stop, length, cancelled, error
    transformer_jax_xla_compilations_total                    programs compiled since start
    transformer_jax_ready                                     1 once every program is compiled

The compilation counter listens to JAX's backend-compile event and to its persistent cache's
hits, so a program made while serving (a shape the warm-up missed) shows on the dashboard and
in the tests wherever its binary came from.
"""

from __future__ import annotations

import jax
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # jax._src.dispatch's name
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"  # jax._src.compiler's name
_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128)


class Metrics:
    """The server's metrics (see the module doc)."""

    def __init__(self):
        self.registry = r = CollectorRegistry()
        prefix = "transformer_jax_"
        self.requests = Counter(
            prefix + "requests",
            "Answers sent, by model, endpoint and HTTP status.",
            ["model", "endpoint", "status"],
            registry=r,
        )
        self.latency = Histogram(
            prefix + "request_seconds",
            "Time from request to answer.",
            ["model", "endpoint"],
            buckets=_LATENCY,
            registry=r,
        )
        self.queue_depth = Gauge(
            prefix + "queue_depth", "Requests waiting for a batch.", ["model"], registry=r
        )
        self.batch_size = Histogram(
            prefix + "batch_size", "Requests per batch.", ["model"], buckets=_BATCH, registry=r
        )
        self.batch_seconds = Histogram(
            prefix + "batch_seconds", "Time per batch.", ["model"], buckets=_LATENCY, registry=r
        )
        self.tokens = Counter(
            prefix + "generated_tokens", "Tokens generated.", ["model"], registry=r
        )
        self.first_token = Histogram(
            prefix + "time_to_first_token_seconds",
            "Time from request to its first generated token.",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.active_slots = Gauge(
            prefix + "active_slots", "GPT slots decoding.", ["model"], registry=r
        )
        self.completions_ended = Counter(
            prefix + "completions_ended",
            "GPT requests that left the engine, by reason (stop, length, cancelled: the client "
            "went away, error).",
            ["model", "reason"],
            registry=r,
        )
        self.compilations = Counter(
            prefix + "xla_compilations",
            "Programs compiled since the server started (by XLA, or read from JAX's persistent "
            "compilation cache).",
            registry=r,
        )
        self.ready = Gauge(
            prefix + "ready", "1 once every model is loaded and compiled.", registry=r
        )
        jax.monitoring.register_event_duration_secs_listener(self._on_event)
        jax.monitoring.register_event_listener(self._on_cache_hit)

    def _on_event(self, event: str, duration: float, **_) -> None:
        if event == COMPILE_EVENT:
            self.compilations.inc()

    def _on_cache_hit(self, event: str, **_) -> None:
        # A program found in JAX_COMPILATION_CACHE_DIR skips XLA but is a new program all
        # the same: a shape the warm-up missed must count wherever its binary came from.
        if event == CACHE_HIT_EVENT:
            self.compilations.inc()

    def batch_observer(self, model: str):
        """`on_batch(size, seconds)` for a model's batcher."""

        def observe(size: int, seconds: float) -> None:
            self.batch_size.labels(model).observe(size)
            self.batch_seconds.labels(model).observe(seconds)

        return observe
