"""Per-user API tokens: named, several per user, shown once, stored as a SHA-256 hash, expiring, revocable.

DRF's own authtoken keeps one plaintext token per user; here a copied database hands out no
API access, and a script's token is revoked without logging its person out anywhere else.
A token acts as its user, so the user's role (roles.py) decides what it may do.
"""

import hashlib
import secrets
from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import messages
from django.db import models
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

SCHEME = "Bearer"
MARK = "crs_"  # lets secret scanners (and people) recognise a leaked token
PREFIX_LENGTH = len(MARK) + 8  # what lists show, so a person can tell their tokens apart
DEFAULT_LIFETIME = timedelta(days=90)
LAST_USED_RESOLUTION = timedelta(minutes=1)  # a busy script writes its token's row once a minute, not per call


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiTokenManager(models.Manager["ApiToken"]):
    def issue(self, user, name: str, expires_at) -> tuple["ApiToken", str]:
        """A new token and its secret; the secret exists only in this return value."""
        secret = MARK + secrets.token_urlsafe(32)
        token = self.create(
            user=user, name=name, prefix=secret[:PREFIX_LENGTH], digest=digest(secret), expires_at=expires_at
        )
        return token, secret

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


class TokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer crs_…`; without the header the next authentication (the session) is tried."""

    def authenticate(self, request):
        words = get_authorization_header(request).split()
        if not words or words[0].decode(errors="replace").lower() != SCHEME.lower():
            return None
        if len(words) != 2:
            raise AuthenticationFailed(f"Authorization: give '{SCHEME}', one space, and the token")
        token = ApiToken.objects.holding(words[1].decode(errors="replace"))
        if token is None:
            raise AuthenticationFailed("the token is unknown, expired or revoked")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return f'{SCHEME} realm="api"'  # makes a missing login a 401, not a 403


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100,
        error_messages={"required": "name is required: say what the token is for"},
        help_text="What the token is for, e.g. the script that uses it.",
    )
    days = forms.IntegerField(
        label="Expires in (days)",
        required=False,
        min_value=1,
        max_value=3650,
        initial=DEFAULT_LIFETIME.days,
        help_text="Empty: never expires.",
        error_messages={
            "invalid": "days must be a whole number",
            "min_value": "days must be between 1 and 3650",
            "max_value": "days must be between 1 and 3650",
        },
    )


@never_cache  # the page that shows a secret is not kept by any cache
@require_http_methods(["GET", "POST"])
def tokens_page(request):
    """The signed-in user's own tokens: create one (its secret shown this once), see when each was used, revoke."""
    form = TokenForm(request.POST or None)
    secret = None
    if request.method == "POST" and form.is_valid():
        days = form.cleaned_data["days"]
        expires_at = timezone.now() + timedelta(days=days) if days else None
        _, secret = ApiToken.objects.issue(request.user, form.cleaned_data["name"], expires_at)
        form = TokenForm()
    status = 400 if request.method == "POST" and secret is None else 200
    context = {"form": form, "secret": secret, "tokens": request.user.api_tokens.all(), "now": timezone.now()}
    return render(request, "dashboard/tokens.html", context, status=status)


@require_POST
def revoke_page(request, pk):
    revoked = ApiToken.objects.filter(pk=pk, user=request.user, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if revoked:
        messages.success(request, "Token revoked: it is refused from now on.")
    return redirect("dashboard:tokens")
