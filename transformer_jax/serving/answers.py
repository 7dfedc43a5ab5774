"""Awaiting an answer while watching the client: a request whose client goes away is cancelled.

Once a handler has read the body, the next ASGI message is `http.disconnect` when the client
closes the connection; `answer_or_cancel` races the work against it and cancels the work (its
queued requests are then skipped by the batcher) when the client leaves first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

T = TypeVar("T")
CLIENT_GONE = 499  # nginx's status for a client that closed the connection (metrics only).


class ClientGone(Exception):
    """The client disconnected before its answer."""


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def answer_or_cancel(request: Request, work: Awaitable[T]) -> T:
    """`await work`, unless the client disconnects first: then the work is cancelled and
    `ClientGone` raised."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if task.done():
        return task.result()
    task.cancel()
    raise ClientGone()
