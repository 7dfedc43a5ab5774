"""Reading a request: its JSON body and each field, checked, or an `ApiError` naming the field.

Malformed bodies (not JSON, not UTF-8, not an object) are 400; a field of the wrong type is
400; a value outside its range (a number too large, a text longer than the model's positions)
is 422; a body over the size limit is 413 (see `app.Gate`). Nothing a client sends can
raise anything else: every check here answers with the field's name and what it accepts.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from transformer_jax.serving.errors import ApiError

MAX_ITEMS = 1024  # The most texts one request may list (each is a row of some batch).


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object.

    Raises:
      ApiError: 400 when the body is not UTF-8 JSON holding an object.
    """
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ApiError(400, f"the body is not UTF-8 (byte {e.start}): send UTF-8 JSON.") from e
    try:
        body = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise ApiError(400, f"the body is not valid JSON ({_short(e)}).") from e
    if not isinstance(body, dict):
        raise ApiError(400, f"the body is a JSON {_json_type(body)}; send a JSON object.")
    return body


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _short(e: Exception) -> str:
    return "nesting too deep" if isinstance(e, RecursionError) else str(e)[:200]


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def shown(value: Any, limit: int = 40) -> str:
    """`value` as an error message quotes it, cut to about `limit` characters (a 400-digit
    integer or a megabyte of text is named, not echoed)."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else f"{text[: limit - 10]}... ({len(text)} characters)"


def _type_error(name: str, want: str, value: Any) -> ApiError:
    return ApiError(400, f"{name} must be {want}, got a JSON {_json_type(value)}.", param=name)


def text(
    body: dict, name: str, *, default: str | None = None, required: bool = False
) -> str | None:
    """A string field (`default` when absent)."""
    if name not in body or body[name] is None:
        if required:
            raise ApiError(400, f"{name} is required: give a string.", param=name)
        return default
    value = body[name]
    if not isinstance(value, str):
        raise _type_error(name, "a string", value)
    return unicode(name, value)


def unicode(name: str, value: str) -> str:
    """`value` if it is valid Unicode text (JSON's "\\ud800" escapes can spell a lone
    surrogate, which no tokenizer can read)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ApiError(
            400,
            f"{name} holds a lone surrogate (\\u{ord(value[e.start]):04x}) at "
            f"character {e.start}: send valid Unicode.",
            param=name,
        ) from None
    return value


def texts(body: dict, name: str, *, required: bool = True) -> tuple[list[str], bool]:
    """A field holding one string or a non-empty list of them: (the strings, whether it was a
    list)."""
    if name not in body or body[name] is None:
        if required:
            raise ApiError(
                400, f"{name} is required: give a string or a list of strings.", param=name
            )
        return [], False
    value = body[name]
    if isinstance(value, str):
        return [unicode(name, value)], False
    if not isinstance(value, list):
        raise _type_error(name, "a string or a list of strings", value)
    if not value:
        raise ApiError(400, f"{name} is an empty list: give at least one string.", param=name)
    if len(value) > MAX_ITEMS:
        raise ApiError(
            413, f"{name} lists {len(value)} items; at most {MAX_ITEMS} per request.", param=name
        )
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _type_error(f"{name}[{i}]", "a string", item)
        unicode(f"{name}[{i}]", item)
    return list(value), True


def integer(body: dict, name: str, default: int | None, low: int, high: int) -> int | None:
    """An integer field in [low, high] (`default` when absent or null)."""
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _type_error(name, "an integer", value)
    if not low <= value <= high:
        raise ApiError(422, f"{name}={shown(value)} is outside [{low}, {high}].", param=name)
    return value


def number(body: dict, name: str, default: float | None, low: float, high: float) -> float | None:
    """A finite number field in [low, high] (`default` when absent or null)."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _type_error(name, "a number", value)
    # NaN and infinities fail the comparison; math.isfinite would overflow on 10**400.
    if not low <= value <= high:
        raise ApiError(422, f"{name}={shown(value)} is outside [{low}, {high}].", param=name)
    return float(value)


def boolean(body: dict, name: str, default: bool | None) -> bool | None:
    """A boolean field (`default` when absent or null)."""
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _type_error(name, "true or false", value)
    return value


def mapping(body: dict, name: str) -> dict | None:
    """An object field (None when absent or null)."""
    value = body.get(name)
    if value is not None and not isinstance(value, dict):
        raise _type_error(name, "an object", value)
    return value


def check_known(body: dict, known: set[str], ignored: set[str] = frozenset()) -> None:
    """Refuses a field that is neither known nor one this server accepts and ignores (a
    typo such as `max_token` would otherwise be silently dropped)."""
    for name in body:
        if name not in known and name not in ignored:
            raise ApiError(
                400,
                f"unknown field {shown(name)}; this endpoint takes {', '.join(sorted(known))}.",
                param=name,
            )
