"""A small WebSocket client for the tests and the benchmarks: log in over HTTP, then read pushes.

Hand-written (RFC 6455, text frames only) because the project has no client library,
and the benchmark needs hundreds of cheap asyncio connections.
"""

import asyncio
import base64
import http.cookiejar
import json
import os
import re
import struct
import urllib.parse
import urllib.request


def login(base_url: str, username: str, password: str) -> str:
    """The Cookie header of a session logged in through Django's login form."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = opener.open(f"{base_url}/accounts/login/", timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    data = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token})
    opener.open(f"{base_url}/accounts/login/", data.encode(), timeout=30)
    cookies = {c.name: c.value for c in jar}
    if "sessionid" not in cookies:
        raise RuntimeError(f"login as {username} failed at {base_url}")
    return "; ".join(f"{name}={value}" for name, value in cookies.items())


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, base_url: str, path: str, cookie: str) -> "Client":
        url = urllib.parse.urlsplit(base_url)
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {base_url}\r\n"
                f"Cookie: {cookie}\r\n\r\n"
            ).encode()
        )
        status = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n", 1)[0]
        if b" 101 " not in status:
            raise ConnectionError(f"WebSocket handshake refused: {status.decode()}")
        return cls(reader, writer)

    async def receive_json(self) -> dict:
        """The next text message, decoded; ConnectionError when the server closes."""
        return json.loads(await self.receive_text())

    async def receive_text(self) -> bytes:
        """The next text message as it came (UTF-8); ConnectionError when the server closes."""
        while True:
            head = await self.reader.readexactly(2)
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack(">H", await self.reader.readexactly(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", await self.reader.readexactly(8))[0]
            payload = await self.reader.readexactly(length)  # servers never mask
            if opcode == 0x8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
                raise ConnectionError(f"closed by the server with code {code}")
            if opcode == 0x9:  # ping: answer as a browser does, or the server drops the socket
                await self.send_frame(0xA, payload)
            if opcode == 0x1:
                return payload

    async def send_frame(self, opcode: int, payload: bytes) -> None:
        """One final frame, masked as a client's must be (short payloads only: pongs)."""
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.writer.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)
        await self.writer.drain()

    def close(self) -> None:
        self.writer.close()
