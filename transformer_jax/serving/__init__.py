"""Serving runs over HTTP: `transformer-jax serve` (the `serve` extra).

    server.serve(["runs/default"], server.Settings(port=8000))

One `Service` per served model (`translation`, `encoders`, `images`; GPT runs are
`completions.CompletionService` over the continuous-batching `gpt_slots.SlotEngine`), a
`Registry` of them, the ASGI `app` with its gate (key, body size, readiness, metrics) and the
endpoint modules `api_openai`, `api_encoders` and `api_translate`. See docs/serving.md.
"""
