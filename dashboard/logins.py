"""Login lockouts (django-axes, configured in settings.py) go to the audit trail."""

import ipaddress

from axes.signals import user_locked_out
from django.conf import settings
from django.dispatch import receiver

from .models import AuditEvent


@receiver(user_locked_out)
def audit_lockout(sender, request, username, ip_address, **kwargs) -> None:
    AuditEvent.objects.create(action="login-locked-out", details={"username": username, "address": ip_address})


def client_address(request) -> str | None:
    """The address a login attempt comes from, as axes keys its per-address lockout on it.

    Behind CRS_TRUSTED_PROXY_COUNT reverse proxies every attempt arrives from the nearest
    proxy's address, so one lockout would lock everybody out: the client is then the address
    the outermost proxy appended to X-Forwarded-For (that many entries from the right; each
    proxy appends the address it was connected from). The header is never read by default,
    nor when it is shorter than that or names no address: a client may send anything in it.
    """
    remote = request.META.get("REMOTE_ADDR")
    proxies = settings.CRS_TRUSTED_PROXY_COUNT
    forwarded = [item.strip() for item in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    if not proxies or len(forwarded) < proxies:
        return remote
    try:
        return str(ipaddress.ip_address(forwarded[-proxies]))
    except ValueError:
        return remote
