"""The audit trail: who did what, when; append-only."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditTrailError(Exception):
    """Raised when code tries to edit or delete an audit event: the trail is append-only."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AuditTrailError("audit events are never edited")

    def delete(self):
        raise AuditTrailError("audit events are never deleted")


class AuditEvent(models.Model):
    """Who did what, when. `actor` None means the system did it (a round, a worker).

    Append-only: an auditor must be able to trust that what is listed is what happened.
    Clusters and migrations with events cannot be deleted (PROTECT), and a user who is
    deleted leaves their username in `actor_name`. `cluster` is None only for the deletion
    of a cluster that had no events, which names it in `details`, and for a login lockout.
    """

    ACTIONS = [
        "settings-changed",
        "preset-switched",
        "emergency-stop",
        "waiting",
        "emergency-stop-lifted",
        "suggested",
        "approved",
        "rejected",
        "expired",
        "running",
        "done",
        "failed",
        "snapshot-imported",
        "cluster-created",
        "cluster-changed",
        "cluster-deleted",
        "login-locked-out",
        "token-created",
        "token-revoked",
        "maintenance-entered",
        "maintenance-left",
        "rule-created",
        "rule-changed",
        "rule-deleted",
        "rebalance-opt-out",
        "rebalance-opt-in",
        "window-added",
        "window-removed",
        "blackout-added",
        "blackout-removed",
        "automation-held",
        "window-changed",
        "blackout-changed",
        "plan-finished",
        "start-held",
        "rolling-started",
        "rolling-paused",
        "rolling-resumed",
        "rolling-cancelled",
        "rolling-step",
        "rolling-flagged",
        "rolling-go-on",
        "rolling-done",
        "capacity-settings-changed",
        "power-down-started",
        "power-down-emptied",
        "power-down-shutdown",
        "power-down-standby",
        "power-down-cancelled",
    ]

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_name = models.CharField(max_length=150, blank=True, editable=False)
    action = models.CharField(max_length=30)
    cluster = models.ForeignKey("Cluster", null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events")
    migration = models.ForeignKey("Migration", null=True, blank=True, on_delete=models.PROTECT)
    details = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["cluster", "at"]), models.Index(fields=["action", "at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or 'system'} {self.action}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise AuditTrailError("audit events are never edited")
        if self.actor is not None:
            self.actor_name = self.actor.get_username()
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AuditTrailError("audit events are never deleted")
