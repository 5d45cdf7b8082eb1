"""Notification destinations (sending them is dashboard/notify.py's)."""

from datetime import timedelta

import apprise
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from .cluster import Cluster
from .validators import duration_validators

EVENTS = {
    "recommendation-waiting": "a new plan waits for a person (manual, partial, or held by a window): one message",
    "migration-failed": "a migration failed (the first failure of a plan; the trail has the rest)",
    "source-unreachable": "collecting from the cluster started failing",
    "plan-finished": "every migration of a plan ended: how many were done and how many failed",
    "imbalance-above": "the imbalance stayed above the threshold for longer than the destination's imbalance_for:"
    " once per episode, again only after it fell to the threshold",
    "n1-bad": "the N+1 verdict turned bad: losing some node would leave guests without room (once per change)",
}


def apprise_url(value: str) -> None:
    """The URL as Apprise reads it; refused with the reason when Apprise cannot use it."""
    if not apprise.Apprise().add(value):
        raise ValidationError(
            "url: Apprise does not recognise this URL (e.g. json://host:port/path, mailto://user:pass@host, "
            "slack://…, ntfy://topic; see https://github.com/caronc/apprise/wiki)"
        )


def known_events(value) -> None:
    if not isinstance(value, list) or any(event not in EVENTS for event in value):
        raise ValidationError(f"events must be a list of: {', '.join(EVENTS)}")


class NotificationDestination(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="notification_destinations")
    name = models.CharField(max_length=100, help_text="Who or what receives it, e.g. 'ops chat'.")
    url = models.TextField(
        validators=[apprise_url], help_text="An Apprise URL; it may hold a secret, so only admins see it."
    )
    events = models.JSONField(default=list, validators=[known_events], help_text="Which events are sent here.")
    imbalance_for = models.DurationField(
        default=timedelta(minutes=15),
        validators=duration_validators("imbalance for", timedelta(0), timedelta(days=7)),
        help_text="imbalance-above: how long the imbalance must stay above the threshold before it is sent.",
    )
    # The episode (Cluster.above_threshold_since) this destination was last told of: one message each.
    imbalance_sent_for = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["cluster", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.cluster})"
