"""Node maintenance and the rolling maintenance that takes nodes down in turn."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class Maintenance(models.Model):
    """A node's maintenance: when it began and ended, who asked, and the guests it held then
    (the ones that return when it ends, where failback says so). Open while `left_at` is empty;
    at most one open per node."""

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="maintenances")
    node = models.CharField(max_length=100)
    entered_at = models.DateTimeField(default=timezone.now)
    entered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    left_at = models.DateTimeField(null=True, blank=True)
    left_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    guests = models.JSONField(default=list, blank=True, help_text="Started guests on the node when it entered.")
    at_once = models.BooleanField(default=False, help_text="The evacuation runs without waiting for approval.")

    class Meta:
        ordering = ["-entered_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "node"],
                condition=models.Q(left_at__isnull=True),
                name="one_open_maintenance_per_node",
            )
        ]

    def __str__(self) -> str:
        return f"{self.node} of {self.cluster} in maintenance since {self.entered_at:%Y-%m-%d %H:%M}"


# Why a move of a node's evacuation waits (the migration's reason on the page and in the API).
HELD = {
    "paused": "the rolling maintenance is paused: this move of {node}'s evacuation starts when it is resumed",
    "cancelled": "the rolling maintenance was cancelled: {node} stays in maintenance and its evacuation stops; "
    "leave maintenance from the maintenance panel",
}


class RollingMaintenance(models.Model):
    """A rolling maintenance: the cluster's nodes taken down and brought back in turn (dashboard/rolling.py).

    Its queue is its RollingNode rows, so it survives a restart of the web and the worker; at most
    one is under way (running or paused) per cluster."""

    STATES = ["running", "paused", "cancelled", "done"]

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="rollings")
    state = models.CharField(max_length=10, choices=[(s, s) for s in STATES], default="running")
    group_size = models.PositiveSmallIntegerField(default=1, help_text="Nodes taken down together at most.")
    at_once = models.BooleanField(default=True, help_text="Evacuations run without waiting for approval.")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster"],
                condition=models.Q(state__in=["running", "paused"]),
                name="one_rolling_maintenance_under_way",
            )
        ]

    def __str__(self) -> str:
        return f"rolling maintenance of {self.cluster} ({self.state})"

    def holds(self, migration) -> str:
        """Why this rolling maintenance keeps the approved `migration` from starting ("" = it does
        not): a move of the evacuation of a node it is draining, while it is paused (the move starts
        once it is resumed), or cancelled while the node stayed in the maintenance it entered then
        (the move waits until an admin leaves maintenance, which expires it)."""
        if migration.kind != "evacuation" or self.state not in HELD:
            return ""
        if not self.queue.filter(node=migration.source, step="draining").exists():
            return ""
        if (
            self.state == "cancelled"
            and not self.cluster.maintenances.filter(
                node=migration.source, left_at=None, entered_at__lte=self.finished_at
            ).exists()
        ):
            return ""  # left since, and entered again: a maintenance of its own
        return HELD[self.state].format(node=migration.source)


class RollingNode(models.Model):
    """One node of a rolling maintenance's queue and how far it got; `group`: the nodes of one
    group go down together (crs.rolling.groups), groups in order."""

    STEPS = ["waiting", "flagged", "draining", "waiting-admin", "returning", "done"]

    rolling = models.ForeignKey(RollingMaintenance, on_delete=models.CASCADE, related_name="queue")
    node = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField()
    group = models.PositiveSmallIntegerField()
    step = models.CharField(max_length=15, choices=[(s, s) for s in STEPS], default="waiting")
    warning = models.TextField(blank=True, help_text="Why taking the node down would break N+1.")
    go_on = models.BooleanField(default=False, help_text="An admin chose to go on despite the warning.")
    uptime_s = models.FloatField(
        null=True, blank=True, help_text="The node's uptime when it began waiting for the admin: less later = rebooted."
    )
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["rolling", "position"]
        constraints = [models.UniqueConstraint(fields=["rolling", "node"], name="rolling_node_once")]

    def __str__(self) -> str:
        return f"{self.node}: {self.step}"
