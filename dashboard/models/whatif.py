"""What-if replays of other settings over a cluster's stored history (dashboard/whatif.py)."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from .cluster import Cluster


class WhatIf(models.Model):
    """A replay of other settings over this cluster's stored history, run by a worker (whatif.py)."""

    STATES = ["queued", "running", "done", "failed"]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="whatifs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    period = models.DurationField(help_text="How much of the stored history is replayed, back from now.")
    changes = models.JSONField(help_text="The settings replayed, over the cluster's current ones.")
    state = models.CharField(max_length=10, choices=[(s, s) for s in STATES], default="queued")
    progress = models.FloatField(default=0.0)  # fraction of the replay done
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
