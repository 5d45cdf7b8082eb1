"""Login lockouts (django-axes, configured in settings.py) go to the audit trail."""

from axes.signals import user_locked_out
from django.dispatch import receiver

from .models import AuditEvent


@receiver(user_locked_out)
def audit_lockout(sender, request, username, ip_address, **kwargs) -> None:
    AuditEvent.objects.create(action="login-locked-out", details={"username": username, "address": ip_address})
