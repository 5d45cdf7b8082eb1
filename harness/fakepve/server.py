"""The fake's HTTPS side: one thread per connection, as pveproxy serves several at once, with
the network's and the cluster's delays as options of the fake (`latency_s`, `slow_s`, `silent`)."""

from __future__ import annotations

import contextlib
import copy
import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from . import schema

if TYPE_CHECKING:
    from .cluster import FakePve

TOKEN = "root@pam!crs=0b8f2f5e-6a4c-4c4e-9a57-3b1d2c9d7e11"


class Gate:
    """What the handler threads share: the lock over the fake's state and the count of requests
    under way (its peak shows the client's concurrency). `released` frees a silent fake's waiters."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.in_flight = 0
        self.peak = 0
        self.connections: set[socket.socket] = set()

    def close(self) -> None:
        """Free the silent fake's waiters and end the kept-alive connections (a stopped cluster)."""
        self.released.set()
        with self.lock:
            for connection in self.connections:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
            self.connections.clear()

    def enter(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1


def serve(fake: FakePve, cert: Path, key: Path) -> ThreadingHTTPServer:
    """Start serving `fake` on a free port of 127.0.0.1 over TLS; the caller shuts it down."""
    gate = fake.gate

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as pveproxy: a client reuses its connections

        def do_GET(self) -> None:
            self._answer("GET", parse_qs(urlsplit(self.path).query))

        def do_DELETE(self) -> None:
            self._answer("DELETE", parse_qs(urlsplit(self.path).query))

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            self._answer("POST", parse_qs(body))

        def setup(self) -> None:
            super().setup()
            with gate.lock:
                gate.connections.add(self.connection)

        def _answer(self, method: str, query: dict[str, list[str]]) -> None:
            gate.enter()
            try:
                if fake.silent:  # the connection was accepted; no answer ever comes
                    gate.released.wait()
                    self.close_connection = True
                    return
                if delay := fake.latency_s + fake.slow_s:
                    time.sleep(delay)
                status, data = self._handled(method, query)
            finally:
                gate.leave()
            body = json.dumps(
                {"data": data if status == 200 else None} | ({} if status == 200 else {"message": data})
            ).encode()
            self.send_response(status, None if status == 200 else str(data))
            self.send_header("Content-Type", "application/json;charset=UTF-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handled(self, method: str, query: dict[str, list[str]]) -> tuple[int, Any]:
            """The fake's answer, checked against the schema; one request at a time inside."""
            path = urlsplit(self.path).path.removeprefix("/api2/json/")
            if self.headers.get("Authorization") != f"PVEAPIToken={TOKEN}":
                return 401, "authentication failure"
            params = {k: v[-1] for k, v in query.items()}
            with gate.lock:
                status, data = fake.handle(method, path, params)
                if fake.checks_schema:
                    fake.strays += schema.request_errors(method, path, params)
                    if status == 200:
                        fake.strays += schema.answer_errors(method, path, data)
                return status, copy.deepcopy(data)  # the state may change before the answer is written

        def log_message(self, *args: Any) -> None:
            pass  # keep the test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return server


def fingerprint(cert_file: Path) -> str:
    """The certificate's SHA-256, AB:CD:… as `pvenode cert info` shows it (worked out here with
    `cryptography`, not with the code under test)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    return x509.load_pem_x509_certificate(cert_file.read_bytes()).fingerprint(hashes.SHA256()).hex(":").upper()


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1, so the connector runs with TLS verification on in tests."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-pve")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "pve.pem", directory / "pve.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file
