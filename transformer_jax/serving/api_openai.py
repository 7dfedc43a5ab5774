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

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from transformer_jax.serving import fields
from transformer_jax.serving.answers import answer_or_cancel
from transformer_jax.serving.completions import cancel_all
from transformer_jax.serving.errors import ApiError

MAX_STOPS = 4  # As OpenAI's API.
IGNORED = {"user", "presence_penalty", "frequency_penalty"}  # Accepted at their defaults only.
ONLY = {"n": 1, "best_of": 1, "echo": False, "presence_penalty": 0, "frequency_penalty": 0}


def _unsupported(body: dict) -> None:
    """Refuses OpenAI's fields this server honours at their defaults only (`ONLY`, else null),
    each checked for its JSON type and OpenAI's range first: echo=0 is a type error."""
    given = {
        "n": fields.integer(body, "n", None, 1, 128),
        "best_of": fields.integer(body, "best_of", None, 1, 20),
        "echo": fields.boolean(body, "echo", None),
        "logprobs": fields.integer(body, "logprobs", None, 0, 5),
        "presence_penalty": fields.number(body, "presence_penalty", None, -2.0, 2.0),
        "frequency_penalty": fields.number(body, "frequency_penalty", None, -2.0, 2.0),
        "suffix": fields.text(body, "suffix"),
        "logit_bias": fields.mapping(body, "logit_bias") or None,  # {}: no bias
    }
    for name, value in given.items():
        if value is not None and value != ONLY.get(name):
            raise ApiError(
                400,
                f"{name}={fields.shown(value)} is not supported by this server "
                f"(only {ONLY.get(name)!r}).",
                param=name,
            )
    fields.text(body, "user")  # Ignored, but a string.
    fields.mapping(body, "stream_options")  # Ignored (no usage chunk), but an object.


def _settings(body: dict, service) -> tuple[dict, list[str]]:
    _unsupported(body)
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
    if stream and listed and len(prompts) > 1:
        raise ApiError(400, "stream takes one prompt per request.", param="prompt")
    submitted = service.submit_all(ids, settings)  # 503 here when the queue is full
    if stream:
        return StreamingResponse(
            _events(service, head, submitted[0], stops),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
            # Also when the client left before the first event (the generator never ran).
            background=BackgroundTask(cancel_all, submitted),
        )
    try:
        results = await answer_or_cancel(request, _gather(service, submitted, stops))
    finally:
        cancel_all(submitted)  # A client gone or a prompt failed: free every slot.
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


async def _one(service, submitted, stops) -> tuple[str, str, int]:
    parts, reason, stats = [], "length", {}
    async for piece, finish in service.pieces(submitted, stops, stats):
        parts.append(piece)
        if finish is not None:
            reason = finish
    return "".join(parts), reason, stats["tokens"]


async def _gather(service, submitted, stops):
    tasks = [asyncio.ensure_future(_one(service, one, stops)) for one in submitted]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


async def _events(service, head, submitted, stops):
    """Server-sent events of one streamed completion. An error after the stream has started
    is sent as an event holding the OpenAI error object."""
    try:
        async for piece, finish in service.pieces(submitted, stops, {}):
            if not piece and finish is None:
                continue
            choice = {"text": piece, "index": 0, "logprobs": None, "finish_reason": finish}
            yield f"data: {json.dumps({**head, 'choices': [choice]})}\n\n"
    except ApiError as e:
        error = {"message": e.message, "type": e.type, "param": e.param}
        yield f"data: {json.dumps({'error': error})}\n\n"
    yield "data: [DONE]\n\n"
