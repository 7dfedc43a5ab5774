"""Encoder and image endpoints.

POST /v1/embeddings  OpenAI's: {"model"?, "input": str | [str], "encoding_format"?:
                     "float" | "base64", "dimensions"?: the model's} -> {"object": "list",
                     "data": [{"object": "embedding", "index", "embedding"}], "usage"}
POST /v1/classify    {"model"?, "input": str | [str | [str, str]]}
                     -> {"model", "data": [{"index", "label", "probabilities": {...}}]}
POST /v1/fill-mask   {"model"?, "input": str | [str], "top_k"?: 1-20}
                     -> {"model", "data": [{"index", "masks": [[{"token", "probability",
                     "text"}]]}]}
POST /v1/classify-image  an image body, or a multipart form with an "image" file;
                     ?model=&resize=true -> {"model", "label", "probabilities"}
"""

from __future__ import annotations

import base64

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse

from transformer_jax.serving import fields
from transformer_jax.serving.answers import answer_or_cancel
from transformer_jax.serving.encoders import MAX_TOP_K
from transformer_jax.serving.errors import ApiError
from transformer_jax.serving.images import decode_image

IMAGE_TYPES = ("image/png", "image/jpeg", "image/jpg", "application/octet-stream")


async def embeddings(request: Request) -> JSONResponse:
    body = await fields.json_body(request)
    fields.check_known(body, {"model", "input", "encoding_format", "dimensions"}, {"user"})
    fields.text(body, "user")  # Ignored, but a string.
    service = request.app.state.registry.pick("embeddings", fields.text(body, "model"))
    request.state.model = service.name
    texts, _ = fields.texts(body, "input")
    encoding = fields.text(body, "encoding_format", default="float")
    if encoding not in ("float", "base64"):
        raise ApiError(
            400, f"encoding_format={encoding!r}: give 'float' or 'base64'.", param="encoding_format"
        )
    dimension = service.embedder.dimension
    fields.integer(body, "dimensions", dimension, dimension, dimension)
    results = await answer_or_cancel(
        request, service.call_many(service.payloads(texts, "input"), "input")
    )
    data = []
    for i, (vector, _) in enumerate(results):
        vector = np.asarray(vector, np.float32)
        value = (
            base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
            if encoding == "base64"
            else vector.tolist()
        )
        data.append({"object": "embedding", "index": i, "embedding": value})
    tokens = sum(n for _, n in results)
    return JSONResponse(
        {
            "object": "list",
            "data": data,
            "model": service.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


async def classify(request: Request) -> JSONResponse:
    body = await fields.json_body(request)
    fields.check_known(body, {"model", "input"})
    service = request.app.state.registry.pick("classification", fields.text(body, "model"))
    request.state.model = service.name
    value = body.get("input")
    if value is None:
        raise ApiError(
            400, "input is required: a text, a [text_a, text_b] pair, or a list.", param="input"
        )
    pair_alone = (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(t, str) for t in value)
        and service.classifier.pair
    )
    items = [value] if isinstance(value, str) or pair_alone else value
    if not isinstance(items, list) or not items or len(items) > fields.MAX_ITEMS:
        raise ApiError(
            400,
            f"input must be a text, a pair or a list of 1 to {fields.MAX_ITEMS}.",
            param="input",
        )
    for i, item in enumerate(items):
        for j, t in enumerate(
            [item] if isinstance(item, str) else item if isinstance(item, list) else []
        ):
            if isinstance(t, str):
                fields.unicode(f"input[{i}][{j}]", t)
    found = await answer_or_cancel(
        request, service.call_many(service.payloads(items, "input"), "input")
    )
    data = [
        {"index": i, "label": p.label, "probabilities": p.probabilities}
        for i, p in enumerate(found)
    ]
    return JSONResponse({"model": service.name, "data": data})


async def fill_mask(request: Request) -> JSONResponse:
    body = await fields.json_body(request)
    fields.check_known(body, {"model", "input", "top_k"})
    service = request.app.state.registry.pick("fill-mask", fields.text(body, "model"))
    request.state.model = service.name
    texts, _ = fields.texts(body, "input")
    top_k = fields.integer(body, "top_k", 5, 1, MAX_TOP_K)
    found = await answer_or_cancel(
        request, service.call_many(service.payloads(texts, "input", top_k), "input")
    )
    data = [
        {
            "index": i,
            "masks": [
                [{"token": c.token, "probability": c.probability, "text": c.text} for c in guesses]
                for guesses in masks
            ],
        }
        for i, masks in enumerate(found)
    ]
    return JSONResponse({"model": service.name, "data": data})


async def classify_image(request: Request) -> JSONResponse:
    params = dict(request.query_params)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        try:
            form = await request.form(max_files=1, max_fields=4)
        except Exception as e:  # noqa: BLE001 - a malformed form is the client's
            raise ApiError(400, f"the multipart form could not be read ({str(e)[:160]}).") from e
        upload = form.get("image")
        if upload is None or isinstance(upload, str):
            raise ApiError(
                400, "the form has no file field 'image' (curl -F image=@file.png).", param="image"
            )
        data = await upload.read()
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    elif kind in IMAGE_TYPES or kind.startswith("image/"):
        data = await request.body()
    else:
        raise ApiError(
            415,
            f"Content-Type {kind or 'none'}: send the image as the body "
            "(image/png, image/jpeg) or as the 'image' field of a multipart form.",
            param="image",
        )
    if not data:
        raise ApiError(400, "the image is empty.", param="image")
    service = request.app.state.registry.pick("image-classification", params.get("model"))
    request.state.model = service.name
    resize = params.get("resize", "false").lower()
    if resize not in ("true", "false", "1", "0"):
        raise ApiError(400, f"resize={resize!r}: give true or false.", param="resize")
    pixels = decode_image(data, service.classifier.image_shape, resize in ("true", "1"))
    (found,) = await answer_or_cancel(request, service.call_many([(pixels, 0)]))
    return JSONResponse(
        {"model": service.name, "label": found.label, "probabilities": found.probabilities}
    )
