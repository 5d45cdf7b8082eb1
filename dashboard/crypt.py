"""Secrets kept in the database (a Proxmox API token's secret), encrypted with Fernet.

The keys come from CRS_FERNET_KEYS (comma-separated Fernet keys: the first encrypts, all
decrypt, so a new key can be put first while the old ones still read what they sealed; then
`manage.py reencrypt_secrets` seals everything with the new one and the old can go). A key
derived from Django's SECRET_KEY always decrypts too, and encrypts when no key is given: the
embedded mode (`make run`) works with nothing set, its SECRET_KEY kept in var/secret-key.
"""

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

import crs.sources
from crs.sources.proxmox import TOKEN


class Undecryptable(crs.sources.ConfigError):
    """A stored secret none of the keys opens: the key that sealed it was removed."""

    def __init__(self) -> None:
        super().__init__(
            "the stored token secret cannot be decrypted: CRS_FERNET_KEYS no longer holds the key "
            "it was encrypted with (put it back after the new one, or enter the secret again)"
        )


def derived_key() -> bytes:
    digest = hashlib.sha256(b"crs token secrets\0" + settings.SECRET_KEY.encode()).digest()
    return base64.urlsafe_b64encode(digest)


def keys() -> MultiFernet:
    given = [k.strip() for k in settings.CRS_FERNET_KEYS if k.strip()]
    try:
        return MultiFernet([Fernet(k) for k in given] + [Fernet(derived_key())])
    except ValueError:
        raise ImproperlyConfigured(
            "CRS_FERNET_KEYS: each key must be 32 url-safe base64-encoded bytes "
            "(make one with `manage.py reencrypt_secrets --new-key`)"
        ) from None


def encrypt(secret: str) -> str:
    return keys().encrypt(secret.encode()).decode()


def decrypt(sealed: str) -> str:
    try:
        return keys().decrypt(sealed.encode()).decode()
    except InvalidToken:
        raise Undecryptable() from None


def reencrypt(sealed: str) -> str:
    """`sealed` under the first key (MultiFernet.rotate)."""
    try:
        return keys().rotate(sealed.encode()).decode()
    except InvalidToken:
        raise Undecryptable() from None


def split_secret(config: dict) -> tuple[dict, str | None]:
    """A Proxmox source config without its secret, and the secret (None when it had none).
    `token` as Proxmox shows it ("user@realm!name=secret") becomes user and token_name."""
    config = dict(config)
    secret = config.pop("token_value", None)
    if isinstance(token := config.get("token"), str) and (match := TOKEN.match(token)):
        del config["token"]
        config |= {"user": match["user"], "token_name": match["name"]}
        secret = match["value"]
    return config, secret
