"""The ASGI application: routes, the gate every request passes, health and metrics.

    app = build_app(registry, metrics, api_key=None, max_body_bytes=1 << 20)

The gate (pure ASGI middleware, so streamed answers pass through untouched) checks the API
key (constant-time; `Authorization: Bearer KEY`, or LibreTranslate's `api_key` field on its
routes), refuses a body over `max_body_bytes` with 413 (by its Content-Length or as it
arrives), answers 503 with Retry-After until the warm-up is done, and counts every answer by
model, endpoint and status with its latency. `/healthz` answers 200 while the process runs,
`/readyz` 200 once every model is compiled.
"""

from __future__ import annotations

import hmac
import logging
import time

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from transformer_jax.serving import api_encoders, api_openai, api_translate
from transformer_jax.serving.answers import CLIENT_GONE, ClientGone
from transformer_jax.serving.errors import AUTH, OVERLOADED, SERVER, ApiError, error_response
from transformer_jax.serving.metrics import Metrics
from transformer_jax.serving.registry import Registry

log = logging.getLogger("transformer_jax.serve")
OPEN_PATHS = ("/healthz", "/readyz")  # Load balancers probe these without a key.
FIELD_KEY_PATHS = ("/translate", "/languages")  # LibreTranslate clients send api_key as a field.
BEFORE_READY = ("/healthz", "/readyz", "/metrics", "/v1/models", "/languages")


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> JSONResponse:
    state = request.app.state
    if not state.ready:
        return JSONResponse({"status": "warming up", "detail": state.progress}, status_code=503)
    return JSONResponse({"status": "ready", "models": state.registry.names()})


async def metrics_page(request: Request) -> Response:
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )


async def models(request: Request) -> JSONResponse:
    data = [s.describe() for s in request.app.state.registry.services.values()]
    return JSONResponse({"object": "list", "data": data})


ROUTES = [
    Route("/healthz", healthz),
    Route("/readyz", readyz),
    Route("/metrics", metrics_page),
    Route("/v1/models", models),
    Route("/v1/completions", api_openai.completions, methods=["POST"]),
    Route("/v1/embeddings", api_encoders.embeddings, methods=["POST"]),
    Route("/v1/classify", api_encoders.classify, methods=["POST"]),
    Route("/v1/fill-mask", api_encoders.fill_mask, methods=["POST"]),
    Route("/v1/classify-image", api_encoders.classify_image, methods=["POST"]),
    Route("/v1/translate", api_translate.translate, methods=["POST"]),
    Route("/translate", api_translate.libre_translate, methods=["POST"]),
    Route("/languages", api_translate.languages, methods=["GET", "POST"]),
]
KNOWN_PATHS = {route.path for route in ROUTES}


async def _api_error(request: Request, exc: ApiError) -> Response:
    return exc.response()


async def _client_gone(request: Request, exc: ClientGone) -> Response:
    return Response(status_code=CLIENT_GONE)  # Nobody reads it; the metrics count it.


async def _http_error(request: Request, exc) -> Response:  # 404, 405 from the router
    what = {
        404: f"no endpoint {request.url.path}; see GET /v1/models and docs/serving.md.",
        405: f"{request.method} is not allowed on {request.url.path}.",
    }
    return error_response(
        exc.status_code, what.get(exc.status_code, str(exc.detail)), headers=exc.headers
    )  # 405's headers name the allowed methods (Allow).


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("error answering %s", request.url.path)
    return error_response(
        500, f"internal error ({type(exc).__name__}); the server logged it.", type=SERVER
    )


class Gate:
    """Key, body size, readiness and metrics for every HTTP request (see the module doc)."""

    def __init__(self, app, *, state, api_key: str | None, max_body_bytes: int):
        self.app, self.state = app, state
        self.api_key = api_key.encode() if api_key else None
        self.max_body = max_body_bytes

    def key_matches(self, given: str | bytes | None) -> bool:
        if self.api_key is None:
            return True
        if given is None:
            return False
        given = given.encode("utf-8", "replace") if isinstance(given, str) else given
        return hmac.compare_digest(given, self.api_key)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        endpoint = path if path in KNOWN_PATHS else "other"
        state = scope.setdefault("state", {})
        status = [500]
        start = time.monotonic()

        async def send_counted(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            refusal = self._refusal(scope, path, state)
            if refusal is not None:
                return await refusal(scope, receive, send_counted)
            try:
                body = await self._body(scope, receive)
            except ClientGone:
                status[0] = CLIENT_GONE
                return
            if isinstance(body, Response):
                return await body(scope, receive, send_counted)
            replayed = [False]

            async def replay():
                if replayed[0]:
                    return await receive()  # Then: http.disconnect when the client leaves.
                replayed[0] = True
                return {"type": "http.request", "body": body, "more_body": False}

            await self.app(scope, replay, send_counted)
        finally:
            metrics: Metrics = self.state.metrics
            model = state.get("model", "-")
            metrics.requests.labels(model, endpoint, str(status[0])).inc()
            metrics.latency.labels(model, endpoint).observe(time.monotonic() - start)

    def _refusal(self, scope, path: str, state: dict) -> Response | None:
        if self.api_key is not None and path not in OPEN_PATHS:
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"")
            scheme, _, token = auth.partition(b" ")
            state["key_ok"] = scheme.lower() == b"bearer" and self.key_matches(token.strip())
            if not state["key_ok"] and path not in FIELD_KEY_PATHS:
                return error_response(
                    401,
                    "a valid API key is required: send the header 'Authorization: Bearer KEY'.",
                    type=AUTH,
                )
        if not self.state.ready and path not in BEFORE_READY:
            return error_response(
                503,
                f"warming up ({self.state.progress}); poll /readyz.",
                type=OVERLOADED,
                headers={"Retry-After": "5"},
            )
        return None

    async def _body(self, scope, receive) -> bytes | Response:
        """The whole body, or the 413 response past the limit."""
        too_big = error_response(
            413, f"the body is over the server's limit of {self.max_body} bytes (--max_body_bytes)."
        )
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body:
                return too_big
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return too_big
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def build_app(
    registry: Registry,
    metrics: Metrics,
    *,
    api_key: str | None = None,
    max_body_bytes: int = 1 << 20,
    lifespan=None,
) -> Starlette:
    """The application of `registry`'s models; `app.state.ready` is set by the server once
    they are warm."""
    from starlette.exceptions import HTTPException

    app = Starlette(
        routes=ROUTES,
        lifespan=lifespan,
        exception_handlers={
            ApiError: _api_error,
            ClientGone: _client_gone,
            HTTPException: _http_error,
            Exception: _server_error,
        },
    )
    # "/v1/models/" is another path (404), not a 307 to "/v1/models": clients get JSON errors.
    app.router.redirect_slashes = False
    app.state.registry, app.state.metrics = registry, metrics
    app.state.ready, app.state.progress = False, "loading"
    gate = Gate(app.router, state=app.state, api_key=api_key, max_body_bytes=max_body_bytes)

    def check_field_key(request: Request, given) -> None:
        if not request.state._state.get("key_ok", True) and not gate.key_matches(
            given if isinstance(given, str) else None
        ):
            raise ApiError(
                401,
                "a valid API key is required: the api_key field or the header "
                "'Authorization: Bearer KEY'.",
                type=AUTH,
            )

    app.state.check_field_key = check_field_key
    app.add_middleware(_Wrap, gate=gate)
    return app


class _Wrap:
    """Puts the gate in front of Starlette's own middleware stack."""

    def __init__(self, app, gate: Gate):
        gate.app = app
        self.gate = gate

    async def __call__(self, scope, receive, send):
        await self.gate(scope, receive, send)
