"""Translation endpoints: `POST /v1/translate` and LibreTranslate's API.

POST /v1/translate  {"model"?, "text": str | [str], "beam_size"?, "alpha"?, "max_length"?}
  -> {"model", "translations": [str, ...]}  (one string: "translation": str)
POST /translate     q, source, target (form or JSON; q a string or a list), api_key?
  -> {"translatedText": str | [str]}
GET  /languages     -> [{"code", "name", "targets": [...]}]
"""

from __future__ import annotations

import urllib.parse

from starlette.requests import Request
from starlette.responses import JSONResponse

from transformer_jax.serving import fields
from transformer_jax.serving.answers import answer_or_cancel
from transformer_jax.serving.errors import ApiError
from transformer_jax.serving.translation import TranslationService

_LANGUAGE_NAMES = {"en": "English", "fr": "French", "de": "German", "es": "Spanish"}


async def translate(request: Request) -> JSONResponse:
    body = await fields.json_body(request)
    fields.check_known(body, {"model", "text", "beam_size", "alpha", "max_length"})
    service = request.app.state.registry.pick("translation", fields.text(body, "model"))
    texts, listed = fields.texts(body, "text")
    assert isinstance(service, TranslationService)
    payloads = service.payloads(
        texts,
        "text",
        fields.integer(body, "beam_size", None, 1, 64),
        fields.number(body, "alpha", service.alpha, 0.0, 10.0),
        fields.integer(body, "max_length", None, 1, service.positions),
    )
    request.state.model = service.name
    out = await answer_or_cancel(request, service.call_many(payloads, "text"))
    key = {"translations": out} if listed else {"translation": out[0]}
    return JSONResponse({"model": service.name, **key})


async def _libre_fields(request: Request) -> dict:
    """LibreTranslate's fields, from a form (what its clients send) or a JSON object."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        return await fields.json_body(request)
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
        pairs = urllib.parse.parse_qsl(
            text, keep_blank_values=True, errors="strict", max_num_fields=16
        )
    except (UnicodeDecodeError, ValueError) as e:
        raise ApiError(400, f"the form is not UTF-8 url-encoded fields ({str(e)[:120]}).") from e
    form: dict = {}
    for name, value in pairs:
        form.setdefault(name, []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in form.items()}


def language_pair(service: TranslationService) -> tuple[str, str]:
    """(source, target) language codes of a translation run, from its data config."""
    data = service.translator.config.get("data", {}) if service.translator.config else {}
    if data.get("source", "embedded") == "embedded":
        return "en", data.get("embedded_target_lang", "fr")
    return data.get("source_lang", "en"), data.get("target_lang", "und")


def _pick_pair(request: Request, source: str, target: str) -> TranslationService:
    services = request.app.state.registry.of_kind("translation")
    pairs = {s.name: language_pair(s) for s in services}
    for s in services:
        src, tgt = pairs[s.name]
        if tgt == target and source in (src, "auto"):
            return s
    offered = ", ".join(f"{a}->{b} ({name})" for name, (a, b) in pairs.items()) or "none"
    raise ApiError(
        400, f"no model translates {source}->{target}; this server has: {offered}.", param="target"
    )


async def libre_translate(request: Request) -> JSONResponse:
    body = await _libre_fields(request)
    request.app.state.check_field_key(request, body.get("api_key"))
    fields.check_known(body, {"q", "source", "target", "format", "api_key", "alternatives"})
    fields.text(body, "api_key")
    alternatives = body.get("alternatives")
    if isinstance(alternatives, str) and alternatives.isdecimal() and len(alternatives) <= 18:
        alternatives = int(alternatives)  # A form's fields are text.
    # How many other translations to list: checked, and none listed (LibreTranslate too
    # lists fewer than asked when it has no more).
    fields.integer({"alternatives": alternatives}, "alternatives", 0, 0, 2**63 - 1)
    texts, listed = fields.texts(body, "q")
    source = fields.text(body, "source", default="auto")
    target = fields.text(body, "target", required=True)
    if fields.text(body, "format", default="text") != "text":
        raise ApiError(400, "format: only 'text' is served (no HTML).", param="format")
    service = _pick_pair(request, source, target)
    request.state.model = service.name
    payloads = service.payloads(texts, "q", None, None, None)
    out = await answer_or_cancel(request, service.call_many(payloads, "q"))
    return JSONResponse({"translatedText": out if listed else out[0]})


async def languages(request: Request) -> JSONResponse:
    targets: dict[str, list[str]] = {}
    for service in request.app.state.registry.of_kind("translation"):
        source, target = language_pair(service)
        targets.setdefault(source, []).append(target)
    return JSONResponse(
        [
            {"code": code, "name": _LANGUAGE_NAMES.get(code, code), "targets": sorted(set(tgts))}
            for code, tgts in sorted(targets.items())
        ]
    )
