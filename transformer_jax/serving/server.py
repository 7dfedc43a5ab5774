"""Starting a server: check the workdirs, bind the port, load and warm up, serve, drain.

    serve(["runs/default", "runs/gpt"], Settings(port=8000))

The workdirs are checked before anything binds or loads (each must be a run whose task has an
endpoint; two runs may not share a name); the port is bound next, so a port in use is one line
at once. Loading and the warm-up then run while the server already answers `/healthz` (and
503 with Retry-After elsewhere); `/readyz` turns 200 once every model is compiled. On SIGTERM
or Ctrl-C the server stops accepting connections, answers what it accepted within
`drain_s`, stops the batchers and exits 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence

from transformer_jax.inference.classifier import Classifier
from transformer_jax.inference.embedder import TASKS as ENCODER_TASKS
from transformer_jax.inference.embedder import Embedder
from transformer_jax.inference.encoder_inputs import load_encoder
from transformer_jax.inference.fill_mask import MaskFiller
from transformer_jax.inference.generator import Generator
from transformer_jax.inference.image_classifier import ImageClassifier
from transformer_jax.inference.translator import Translator
from transformer_jax.runs.layout import CheckpointError
from transformer_jax.runs.load import open_run
from transformer_jax.serving.app import build_app
from transformer_jax.serving.completions import CompletionService
from transformer_jax.serving.encoders import ClassifyService, EmbeddingService, FillMaskService
from transformer_jax.serving.images import ImageService
from transformer_jax.serving.metrics import Metrics
from transformer_jax.serving.registry import Registry
from transformer_jax.serving.settings import API_KEY_ENV, Settings
from transformer_jax.serving.translation import TranslationService

log = logging.getLogger("transformer_jax.serve")
SERVED = {  # (config.model.name, config.task) -> what is served
    ("decoder_only", "language_model"): "completions",
    ("encoder_decoder", "translation"): "translation",
    ("encoder_only", "bert_pretrain"): "embeddings and fill-mask",
    ("encoder_only", "classify"): "classification and embeddings",
    ("vit", "image_classify"): "image classification",
}


@dataclasses.dataclass(frozen=True)
class Plan:
    """One workdir to serve: its folder, name and (model, task)."""

    workdir: str
    name: str
    kind: tuple[str, str]


def plan(workdirs: Sequence[str], names: Sequence[str] | None = None) -> list[Plan]:
    """Checks the workdirs before anything loads: each a run whose task is served, names
    distinct. `names` (optional) overrides the folder names, one per workdir.

    Raises:
      CheckpointError: not a run (the file it lacks named), or a run with no endpoint.
      ValueError: no workdir, names not one per workdir, or two runs with one name.
    """
    if not workdirs:
        raise ValueError("give at least one --workdir to serve.")
    if names and len(names) != len(workdirs):
        raise ValueError(f"{len(names)} --name for {len(workdirs)} --workdir: give one each.")
    out, seen = [], {}
    for i, workdir in enumerate(workdirs):
        folder, config = open_run(workdir)
        kind = (config.model.get("name"), config.get("task", "translation"))
        if kind not in SERVED:
            offered = "; ".join(f"{m} + {t}: {what}" for (m, t), what in SERVED.items())
            raise CheckpointError(
                f"{workdir}: a {kind[1]!r} run of a {kind[0]!r} model has no "
                f"endpoint. Served: {offered}."
            )
        name = names[i] if names else os.path.basename(str(workdir).rstrip("/")) or str(workdir)
        if name in seen:
            raise ValueError(
                f"{workdir} and {seen[name]} are both named {name!r}: give each a "
                "--name (one per --workdir, in order)."
            )
        seen[name] = workdir
        out.append(Plan(str(workdir), name, kind))
    return out


def load(plans: Sequence[Plan], settings: Settings, metrics: Metrics, registry: Registry) -> None:
    """Loads each planned run into its services and adds them to `registry`."""
    limits, mesh = settings.limits, settings.mesh
    for p in plans:
        model, task = p.kind
        if model == "decoder_only":
            generator = Generator.from_checkpoint(p.workdir, mesh=mesh)
            registry.add(CompletionService(p.name, generator, limits, metrics))
        elif model == "encoder_decoder":
            translator = Translator.from_checkpoint(p.workdir, mesh=mesh)
            registry.add(
                TranslationService(p.name, translator, limits, metrics, settings.beam_sizes)
            )
        elif model == "encoder_only":
            run = load_encoder(p.workdir, ENCODER_TASKS, "serve", None, mesh)
            registry.add(EmbeddingService(p.name, Embedder.from_run(run), limits, metrics))
            if task == "classify":
                registry.add(ClassifyService(p.name, Classifier.from_run(run), limits, metrics))
            else:
                registry.add(FillMaskService(p.name, MaskFiller(run), limits, metrics))
        else:
            classifier = ImageClassifier.from_checkpoint(p.workdir, mesh=mesh)
            registry.add(ImageService(p.name, classifier, limits, metrics))


class _WarmUpStopped(Exception):
    """The server was asked to stop while warming up."""


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 picks a free one.

    Raises:
      OSError: one line naming the address when it is in use or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise OSError(
                f"{host}:{port} is in use by another program: stop it or give another "
                "--port (0 picks a free one)."
            ) from None
        raise OSError(f"cannot listen on {host}:{port} ({e.strerror}).") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_settings(settings: Settings) -> None:
    """Raises ValueError for settings that cannot serve safely (another address without a
    key) or at all."""
    if not is_loopback(settings.host) and not settings.api_key:
        raise ValueError(
            f"--host={settings.host} serves other machines: give an API key "
            f"(--api_key, or the {API_KEY_ENV} environment variable); clients "
            "send it as 'Authorization: Bearer KEY'."
        )
    bad = [b for b in settings.beam_sizes if b < 1]
    if not settings.beam_sizes or bad:
        raise ValueError(f"--beam_sizes must list positive integers, got {settings.beam_sizes}.")


def serve(
    workdirs: Sequence[str],
    settings: Settings,
    names: Sequence[str] | None = None,
    *,
    announce=print,
) -> int:
    """Runs the server until SIGTERM or Ctrl-C; returns the exit code (0 after a drain, 1
    when a model failed to load)."""
    import uvicorn

    check_settings(settings)
    plans = plan(workdirs, names)
    sock = bind(settings.host, settings.port)
    port = sock.getsockname()[1]
    metrics, registry = Metrics(), Registry()
    failed: list[str] = []
    server: uvicorn.Server | None = None

    stopping = threading.Event()  # SIGTERM during the warm-up: stop between its batches.

    def progress(text: str) -> None:
        if stopping.is_set():
            raise _WarmUpStopped()
        app.state.progress = text

    def warm_up() -> None:
        try:
            load(plans, settings, metrics, registry)
            for service in list(registry.services.values()):
                service.warmup(progress=progress)
                service.start()
            # The loaded models, programs and modules are millions of long-lived objects that
            # every full collection would walk again (pauses of 0.2-0.4 s under load, the
            # latency tail): moved out of the collector's reach once, here.
            gc.collect()
            gc.freeze()
            app.state.ready = True
            metrics.ready.set(1)
            announce(
                f"ready: {', '.join(registry.names())} "
                f"({int(metrics.compilations._value.get())} programs compiled)"
            )
        except _WarmUpStopped:
            log.info("stopped during the warm-up")
        except Exception as e:  # noqa: BLE001 - reported, and the server exits 1
            log.exception("loading failed")
            failed.append(f"{type(e).__name__}: {e}")
            announce(f"error: {e}")
            server.should_exit = True

    @contextlib.asynccontextmanager
    async def lifespan(app_):
        loader = threading.Thread(target=warm_up, name="warm-up", daemon=True)
        loader.start()
        yield
        stopping.set()
        loader.join()  # At most the warm-up batch (or GPT engine warm-up) in flight.
        for service in list(registry.services.values()):
            service.stop(settings.drain_s)

    app = build_app(
        registry,
        metrics,
        api_key=settings.api_key,
        max_body_bytes=settings.max_body_bytes,
        lifespan=lifespan,
    )
    config = uvicorn.Config(
        app,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=int(settings.drain_s),
        limit_concurrency=None,
        timeout_keep_alive=5,
    )
    server = uvicorn.Server(config)
    served = ", ".join(f"{p.name} ({SERVED[p.kind]})" for p in plans)
    announce(f"serving on http://{settings.host}:{port}: {served}; warming up")
    sys.stdout.flush()
    # uvicorn raises the signal that stopped it again once it has drained, to end the process
    # as that signal would; with these handlers in place that only returns, and serve exits 0.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    server.run(sockets=[sock])
    return 1 if failed else 0
