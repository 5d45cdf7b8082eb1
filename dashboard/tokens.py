"""Per-user API tokens: named, several per user, shown once, stored as a SHA-256 hash, expiring, revocable.

DRF's own authtoken keeps one plaintext token per user; here a copied database hands out no
API access, and a script's token is revoked without logging its person out anywhere else.
A token acts as its user, so the user's role (roles.py) decides what it may do.
"""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

MARK = "crs_"  # lets secret scanners (and people) recognise a leaked token
PREFIX_LENGTH = len(MARK) + 8  # what lists show, so a person can tell their tokens apart
DEFAULT_LIFETIME = timedelta(days=90)
LAST_USED_RESOLUTION = timedelta(minutes=1)  # a busy script writes its token's row once a minute, not per call


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiTokenManager(models.Manager["ApiToken"]):
    def issue(self, user, name: str, expires_at, actor=None) -> tuple["ApiToken", str]:
        """A new token and its secret; the secret exists only in this return value. Issued for a
        person (`actor`: the page, the API), it is audited as the security event it is: who made
        whose token, its name and prefix, never the secret."""
        secret = MARK + secrets.token_urlsafe(32)
        token = self.create(
            user=user, name=name, prefix=secret[:PREFIX_LENGTH], digest=digest(secret), expires_at=expires_at
        )
        if actor is not None:
            expires = expires_at.isoformat() if expires_at else None
            _audit(actor, "token-created", token, expires_at=expires)
        return token, secret

    def revoke(self, actor, **which) -> bool:
        """Revoke the live token matching `which` (refused from now on); audited with `actor`."""
        token = self.filter(revoked_at__isnull=True, **which).first()
        if token is None or not self.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()):
            return False
        _audit(actor, "token-revoked", token)
        return True

    def holding(self, secret: str) -> "ApiToken | None":
        """The live token with this secret (not revoked, not expired, its user active), or None."""
        now = timezone.now()
        token = (
            self.select_related("user")
            .filter(digest=digest(secret), revoked_at__isnull=True, user__is_active=True)
            .filter(models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now))
            .first()
        )
        if token is not None and (token.last_used_at is None or token.last_used_at < now - LAST_USED_RESOLUTION):
            self.filter(pk=token.pk).update(last_used_at=now)
        return token


def _audit(actor, action: str, token: "ApiToken", **details) -> None:
    from .models.audit import AuditEvent  # dashboard.models imports this module

    who = {"user": token.user.get_username(), "token": token.name, "prefix": token.prefix}
    AuditEvent.objects.create(actor=actor, action=action, details=who | details)


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. the script that uses it.")
    prefix = models.CharField(max_length=PREFIX_LENGTH, editable=False, help_text="The secret's first characters.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; empty: never.")
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ApiTokenManager()

    class Meta:
        ordering = ["-created_at", "-pk"]
        permissions = [("manage_all_tokens", "Can create and revoke the API tokens of any user")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…) of {self.user}"
