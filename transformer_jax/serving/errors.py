"""The one error shape every endpoint answers with: OpenAI's `{"error": {...}}`.

    raise ApiError(422, "max_tokens=9000 is more than this model's cap of 200.", param="max_tokens")

`message` says what was wrong and what to do, `type` is the class of error (OpenAI's
`invalid_request_error` for a request the client can fix), `param` names the request field,
or None. The `openai` package reads exactly these keys into its exceptions.
"""

from __future__ import annotations

import json

from starlette.responses import JSONResponse

INVALID = "invalid_request_error"  # The client can fix the request.
OVERLOADED = "overloaded_error"  # Try again later (503, with Retry-After).
TIMEOUT = "timeout_error"  # The request's deadline passed before its answer (504).
SERVER = "server_error"  # Our fault (500): never for bad input.
AUTH = "authentication_error"  # A missing or wrong API key (401).


class _AsciiJSON(JSONResponse):
    """JSON with every non-ASCII character escaped: a message or param quoting the client's
    text stays sendable when that text holds a lone surrogate (JSON's "\\ud800"), which
    UTF-8 cannot encode."""

    def render(self, content) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


class ApiError(Exception):
    """An answer other than 200: its HTTP status and the OpenAI-shaped body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        type: str = INVALID,  # noqa: A002 - the field's name in the OpenAI shape
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.param, self.type = status, message, param, type
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.type, "param": self.param}}
        return _AsciiJSON(body, status_code=self.status, headers=self.headers)


def error_response(status: int, message: str, *, param=None, type: str = INVALID, headers=None):
    """The JSON response of an error (for handlers that answer instead of raising)."""
    return ApiError(status, message, param=param, type=type, headers=headers).response()
