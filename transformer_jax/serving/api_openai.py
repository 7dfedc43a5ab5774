"""OpenAI's completions endpoint for GPT runs (embeddings: `api_encoders`).

    POST /v1/completions {"model"?, "prompt": str | [str], "max_tokens"?: 16, "temperature"?: 1,
                          "top_p"?: 1, "top_k"?: 0, "stop"?: str | [str] (4 at most),
                          "seed"?, "stream"?: false, "n"?: 1, "echo"?: false, "logprobs"?: null}
      -> {"id", "object": "text_completion", "created", "model", "choices": [{"text", "index",
          "logprobs": null, "finish_reason": "stop" | "length"}], "usage"}

With `"stream": true` the answer is server-sent events, one `data: {...}` chunk per piece of
text as it is generated (the same object with the piece as `text`), the last with its
`finish_reason`, then `data: [DONE]`. Without a seed, sampling draws a fresh one.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from transformer_jax.serving import fields
from transformer_jax.serving.answers import answer_or_cancel
from transformer_jax.serving.errors import ApiError

MAX_STOPS = 4  # As OpenAI's API.
IGNORED = {"user", "presence_penalty", "frequency_penalty"}  # Accepted at their defaults only.


def _settings(body: dict, service) -> tuple[dict, list[str]]:
    for name, default in (
        ("n", 1),
        ("best_of", 1),
        ("echo", False),
        ("logprobs", None),
        ("presence_penalty", 0),
        ("frequency_penalty", 0),
        ("suffix", None),
        ("logit_bias", None),
    ):
        value = body.get(name)
        if value is not None and value != default and value != {}:
            raise ApiError(
                400,
                f"{name}={value!r} is not supported by this server (only {default!r}).",
                param=name,
            )
    max_tokens = fields.integer(
        body, "max_tokens", min(16, service.max_tokens), 1, service.max_tokens
    )
    temperature = fields.number(body, "temperature", 1.0, 0.0, 100.0)
    top_p = fields.number(body, "top_p", 1.0, 0.0, 1.0)
    if top_p == 0:
        raise ApiError(422, "top_p=0 keeps no token; give a value in (0, 1].", param="top_p")
    top_k = fields.integer(body, "top_k", 0, 0, 1 << 30)
    seed = fields.integer(body, "seed", None, -(2**63), 2**63 - 1)
    if seed is None:
        seed = secrets.randbits(63)
    stops, _ = fields.texts(body, "stop", required=False)
    if len(stops) > MAX_STOPS or any(not s for s in stops):
        raise ApiError(400, f"stop: give at most {MAX_STOPS} non-empty strings.", param="stop")
    settings = dict(
        max_new_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed
    )
    return settings, stops


async def completions(request: Request):
    body = await fields.json_body(request)
    fields.check_known(
        body,
        {
            "model",
            "prompt",
            "max_tokens",
            "temperature",
            "top_p",
            "top_k",
            "stop",
            "seed",
            "stream",
            "n",
            "best_of",
            "echo",
            "logprobs",
            "suffix",
            "logit_bias",
            "stream_options",
        },
        IGNORED,
    )
    service = request.app.state.registry.pick("completion", fields.text(body, "model"))
    request.state.model = service.name
    prompts, listed = fields.texts(body, "prompt")
    settings, stops = _settings(body, service)
    stream = fields.boolean(body, "stream", False)
    ids = [
        service.prompt_ids(
            p, "prompt" if not listed else f"prompt[{i}]", settings["max_new_tokens"]
        )
        for i, p in enumerate(prompts)
    ]
    head = {
        "id": f"cmpl-{secrets.token_hex(12)}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": service.name,
    }
    service.check_capacity(len(ids))
    if stream:
        if listed and len(prompts) > 1:
            raise ApiError(400, "stream takes one prompt per request.", param="prompt")
        return StreamingResponse(
            _events(service, head, ids[0], settings, stops),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )
    results = await answer_or_cancel(request, _gather(service, ids, settings, stops))
    choices = [
        {"text": text, "index": i, "logprobs": None, "finish_reason": reason}
        for i, (text, reason, _) in enumerate(results)
    ]
    prompt_tokens = sum(map(len, ids))
    completion_tokens = sum(n for *_, n in results)
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return JSONResponse({**head, "choices": choices, "usage": usage})


async def _one(service, ids, settings, stops) -> tuple[str, str, int]:
    parts, reason, stats = [], "length", {}
    async for piece, finish in service.pieces(ids, dict(settings), stops, stats):
        parts.append(piece)
        if finish is not None:
            reason = finish
    return "".join(parts), reason, stats["tokens"]


async def _gather(service, ids, settings, stops):
    tasks = [asyncio.ensure_future(_one(service, one, settings, stops)) for one in ids]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


async def _events(service, head, ids, settings, stops):
    """Server-sent events of one streamed completion. An error after the stream has started
    is sent as an event holding the OpenAI error object."""
    try:
        async for piece, finish in service.pieces(ids, dict(settings), stops, {}):
            if not piece and finish is None:
                continue
            choice = {"text": piece, "index": 0, "logprobs": None, "finish_reason": finish}
            yield f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"
    except ApiError as e:
        error = {"message": e.message, "type": e.type, "param": e.param}
        yield f"data: {json.dumps({'error': error})}\n\n"
    yield "data: [DONE]\n\n"
