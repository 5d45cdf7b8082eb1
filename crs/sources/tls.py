"""How the Proxmox connector trusts a cluster's certificate: the system's CAs, a CA bundle, a
pinned SHA-256 fingerprint, or nothing, and only when chosen ("insecure").

A Proxmox cluster usually serves a self-signed certificate; its own tools pin it by the
certificate's SHA-256. Pinning here is urllib3's `assert_fingerprint` on the connector's
requests session, so the check runs in the handshake of every connection, before the token
is sent.
"""

from __future__ import annotations

import hashlib
import re
import socket
import ssl
from typing import Any

from requests import PreparedRequest, Response
from requests.adapters import HTTPAdapter

from .config import ConfigError

MODES = ("system", "ca-bundle", "fingerprint", "insecure")
_DIGITS = re.compile(r"[0-9A-F]{64}")


def mode(verify_ssl: bool | str, fingerprint: str) -> str:
    """Which of MODES a connector config's verify_ssl and fingerprint choose."""
    if fingerprint:
        return "fingerprint"
    if isinstance(verify_ssl, str):
        return "ca-bundle"
    return "system" if verify_ssl else "insecure"


def fingerprint(der: bytes) -> str:
    """SHA-256 of a DER certificate, as `pvenode cert info` shows it: AB:CD:…"""
    return hashlib.sha256(der).digest().hex(":").upper()


def pinned(text: str) -> str:
    """A fingerprint as an admin pastes it (colons or not, any case) in fingerprint()'s form."""
    digits = re.sub(r"[\s:]", "", text).upper().removeprefix("SHA256")
    if not _DIGITS.fullmatch(digits):
        raise ConfigError(f"fingerprint {text!r}: not a SHA-256 fingerprint (64 hex digits, colons optional)")
    return bytes.fromhex(digits).hex(":").upper()


def presented(host: str, port: int, timeout_s: float) -> str | None:
    """The fingerprint of the certificate the server presents now, unverified: only to name it
    when it is refused. None when no handshake gets that far."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=host) as sock:
                der = sock.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return None
    return fingerprint(der) if der else None


class PinnedAdapter(HTTPAdapter):
    """Accept exactly the certificate with this SHA-256 fingerprint (no CA, no host name: the pin
    names the certificate itself, as Proxmox's own tools trust a cluster's)."""

    def __init__(self, sha256: str, **kwargs: Any):
        self.sha256 = pinned(sha256)
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["assert_fingerprint"] = self.sha256.replace(":", "").lower()
        super().init_poolmanager(*args, **kwargs)

    def send(  # type: ignore[override]  # verify is the pin's, whatever the session says
        self, request: PreparedRequest, stream: bool = False, timeout: Any = None, verify: Any = True, **kwargs: Any
    ) -> Response:
        """The pin replaces CA verification (urllib3 checks the fingerprint without it)."""
        return super().send(request, stream=stream, timeout=timeout, verify=False, **kwargs)
