"""A TCP proxy to put a real network fault between the product and a service it needs.

The shared PostgreSQL cannot be stopped for one test (other tests use it), so the stack
under test connects through this proxy instead, and the test "stops the database" by
closing the proxy: open connections are reset (as when the server's host goes away) and new
ones refused, until it is opened again on the same port. Runs on an asyncio loop of its own
in a thread, so the test's code stays synchronous.
"""

import asyncio
import threading
import urllib.parse

from harness.stack import free_port


class TcpProxy:
    def __init__(self, host: str, port: int, listen_port: int):
        self.target, self.port = (host, port), listen_port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="tcp-proxy", daemon=True)
        self.thread.start()
        self.server: asyncio.Server | None = None
        self.transports: set[asyncio.BaseTransport] = set()

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def open(self) -> None:
        """Accept connections again (and pass each on to the target)."""
        self._run(self._open())

    def close(self) -> None:
        """Refuse new connections and reset every open one."""
        self._run(self._close())

    def shut(self) -> None:
        """Close, and end the proxy's thread (the test's teardown)."""
        self.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)

    async def _open(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def _close(self) -> None:
        if self.server is not None:
            self.server.close()  # the listening socket: a new connect is refused
            self.server = None
        for transport in self.transports:
            transport.abort()  # RST, as a vanished server gives; no orderly goodbye
        self.transports.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = {writer.transport, upstream_writer.transport}
        self.transports |= pair
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer), return_exceptions=True)
        self.transports -= pair


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy one direction until its end closes, then close the other end's writing side."""
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


def in_front_of_database(url: str) -> tuple[TcpProxy, str]:
    """An open proxy to the PostgreSQL server of `url`, and the URL that reaches it through the proxy."""
    parts = urllib.parse.urlsplit(url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432, free_port())
    proxy.open()
    return proxy, parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxy.port}").geturl()
