"""How a server runs: its batching limits and its settings (the `serve` command's flags).

Plain data with no server library behind it, so the command line can describe its flags
without the `serve` extra installed.
"""

from __future__ import annotations

import dataclasses

API_KEY_ENV = "TRANSFORMER_JAX_API_KEY"  # Where `serve` reads the API key when no flag gives it.


@dataclasses.dataclass(frozen=True)
class Limits:
    """The batching knobs and caps of every served model.

    Attributes:
      max_batch: most requests (texts, images, GPT slots) computed together.
      max_wait_ms: longest a request waits for others to fill its batch.
      max_queue: most requests waiting per model; more are refused with 503 at once.
      timeout_s: a request not answered by then gets 504 (work not started is dropped).
      max_tokens: the most tokens a completion may ask for (and its default cap).
      retry_after_s: what a 503 tells the client to wait before retrying.
    """

    max_batch: int = 32
    max_wait_ms: float = 5.0
    max_queue: int = 256
    timeout_s: float = 60.0
    max_tokens: int = 256
    retry_after_s: int = 1


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the server runs (the `serve` command's flags)."""

    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    limits: Limits = Limits()
    beam_sizes: tuple[int, ...] = (4, 1)
    max_body_bytes: int = 1 << 20
    drain_s: float = 25.0
    mesh: str | None = None
    log_level: str = "info"
