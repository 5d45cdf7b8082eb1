"""At most as many HTTP requests inside Django at once as the process has database
connections; the rest wait at the door.

Under ASGI every request runs in a thread of its own and takes a pooled connection for its
whole length. One web process serves some 8-12 pages a second, so a burst of 150 page loads
is 13-20 s of work: the last requests waited in the pool past its 10 s timeout and failed with
a 500 (measured with the production settings: 47-56 of 150). Waiting here costs neither a
thread nor a connection, so the burst is served in about the same time and every request is
answered (150 of 150 in 19 s, bench/README.md); one that
waits longer than the queue timeout gets a 503 with Retry-After, which browsers, proxies and
scripts know to retry, instead of a 500. WebSockets pass: they hold no connection between
pushes.
"""

import asyncio
from typing import Any

BUSY = b"The dashboard is busy: try again in a few seconds.\n"


class Admission:
    def __init__(self, app: Any, limit: int, timeout: float) -> None:
        self.app, self.limit, self.timeout = app, limit, timeout
        self.turns: asyncio.Semaphore | None = None  # made in the server's event loop, on first use

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.turns is None:
            self.turns = asyncio.Semaphore(self.limit)
        try:
            await asyncio.wait_for(self.turns.acquire(), self.timeout)
        except TimeoutError:
            await busy(send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.turns.release()


async def busy(send: Any) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"5")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": BUSY})
