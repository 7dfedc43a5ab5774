"""Serve runs over HTTP: OpenAI-compatible completions and embeddings, translation (also as
LibreTranslate), classification, fill-mask and image classification, with dynamic batching.

    pip install -e ".[serve]"
    transformer-jax serve --workdir=runs/default --workdir=runs/gpt_stdlib --port=8000
    curl -s localhost:8000/v1/translate -d '{"text": "twenty-one"}'

Each workdir is served under its folder's name (or --name, one per --workdir, in order).
Every program is compiled at start-up: /readyz answers 200 once that is done, 503 before.
The server binds 127.0.0.1; another --host needs --api_key (or TRANSFORMER_JAX_API_KEY),
which clients send as `Authorization: Bearer KEY`. SIGTERM or Ctrl-C stops accepting,
answers what was accepted within --drain_s seconds and exits 0. See docs/serving.md.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from transformer_jax.cli import common
from transformer_jax.serving.settings import API_KEY_ENV, Limits, Settings

try:  # The server needs the serve extra; without it the command says so (`serve` below).
    from transformer_jax.serving.server import serve as run_server
except ImportError as missing:
    run_server, MISSING = None, missing.name


def define_flags(fv: flags.FlagValues) -> None:
    limits = Limits()
    flags.DEFINE_multi_string("workdir", None, "A run to serve (repeatable).", flag_values=fv)
    flags.DEFINE_multi_string(
        "name",
        None,
        "The name each --workdir is served under, in order (default: its folder's name).",
        flag_values=fv,
    )
    flags.DEFINE_string("host", "127.0.0.1", "Address to listen on.", flag_values=fv)
    flags.DEFINE_integer(
        "port", 8000, "Port to listen on (0: a free one, printed).", flag_values=fv
    )
    flags.DEFINE_string(
        "api_key",
        None,
        "Require 'Authorization: Bearer KEY' (default: the "
        "TRANSFORMER_JAX_API_KEY environment variable).",
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max_batch",
        limits.max_batch,
        "Most requests computed together per model (GPT: decoding slots).",
        flag_values=fv,
    )
    flags.DEFINE_float(
        "max_wait_ms",
        limits.max_wait_ms,
        "Longest a request waits for others to fill its batch.",
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max_queue",
        limits.max_queue,
        "Most requests waiting per model; more get 503 with Retry-After.",
        flag_values=fv,
    )
    flags.DEFINE_float(
        "timeout_s", limits.timeout_s, "A request not answered by then gets 504.", flag_values=fv
    )
    flags.DEFINE_integer(
        "max_tokens", limits.max_tokens, "Most tokens a completion may ask for.", flag_values=fv
    )
    flags.DEFINE_list(
        "beam_sizes",
        ["4", "1"],
        "Translation beam sizes requests may ask for, "
        "each compiled at start-up; the first is the default.",
        flag_values=fv,
    )
    flags.DEFINE_integer(
        "max_body_bytes", 1 << 20, "Largest request body (413 past it).", flag_values=fv
    )
    flags.DEFINE_float(
        "drain_s", 25.0, "On SIGTERM, how long accepted requests may take.", flag_values=fv
    )
    common.mesh_flag(fv)
    flags.DEFINE_enum(
        "log_level",
        "info",
        ["debug", "info", "warning", "error"],
        "The server's log level.",
        flag_values=fv,
    )


def serve(fv: flags.FlagValues, args: list[str]) -> int:
    if run_server is None:
        raise ImportError(
            f"serve needs the serve extra ({MISSING} is not installed): pip install -e '.[serve]'"
        )
    for flag, minimum in (
        ("max_batch", 1),
        ("max_queue", 1),
        ("max_tokens", 1),
        ("max_body_bytes", 1),
        ("port", 0),
    ):
        common.at_least(getattr(fv, flag), minimum, flag)
    for flag in ("max_wait_ms", "timeout_s", "drain_s"):
        if not getattr(fv, flag) >= 0:
            raise ValueError(f"--{flag} must be >= 0, got {getattr(fv, flag)}.")
    try:
        beams = tuple(int(b) for b in fv.beam_sizes)
    except ValueError:
        raise ValueError(f"--beam_sizes must list integers, got {fv.beam_sizes}.") from None
    limits = Limits(
        max_batch=fv.max_batch,
        max_wait_ms=fv.max_wait_ms,
        max_queue=fv.max_queue,
        timeout_s=fv.timeout_s,
        max_tokens=fv.max_tokens,
    )
    settings = Settings(
        host=fv.host,
        port=fv.port,
        api_key=fv.api_key or os.environ.get(API_KEY_ENV) or None,
        limits=limits,
        beam_sizes=beams,
        max_body_bytes=fv.max_body_bytes,
        drain_s=fv.drain_s,
        mesh=fv.mesh,
        log_level=fv.log_level,
    )
    return run_server(fv.workdir or [], settings, fv.name)


COMMAND = common.Command(
    "python -m transformer_jax serve",
    __doc__,
    define_flags,
    serve,
    usage_flags="--workdir=DIR [--workdir=DIR ...]",
)

main = COMMAND.run  # main(argv=None) -> exit code


if __name__ == "__main__":
    sys.exit(main())
