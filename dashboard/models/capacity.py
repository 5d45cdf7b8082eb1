"""Capacity: the standard guest sizes, the hourly counts of what still fits, and nodes powered down."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from .cluster import Cluster


def default_capacity_sizes() -> dict:
    """The standard guest sizes the capacity page counts (dashboard/capacity.py), until an admin edits them."""
    return {name: dict(size) for name, size in DEFAULT_CAPACITY_SIZES.items()}


DEFAULT_CAPACITY_SIZES = {
    "small": {"cores": 1.0, "memory_bytes": 2 * 2**30},
    "medium": {"cores": 4.0, "memory_bytes": 8 * 2**30},
    "large": {"cores": 8.0, "memory_bytes": 32 * 2**30},
}
DEFAULT_IDLE_WATTS = 120.0  # a two-socket server idling; the energy estimate says it is an estimate


class CapacitySettings(models.Model):
    """A cluster's standard guest sizes, the idle power of its nodes and its standby nodes (dashboard/capacity.py)."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="capacity_settings")
    sizes = models.JSONField(default=default_capacity_sizes, help_text="small, medium, large: cores, memory_bytes.")
    idle_watts = models.FloatField(default=DEFAULT_IDLE_WATTS, help_text="What one idle node draws (W).")
    standby = models.JSONField(
        default=list, blank=True, help_text="Nodes powered down on purpose, the first to wake first."
    )


class CapacitySample(models.Model):
    """How many more guests of one standard size fit, once an hour: the page's 30-day trend."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="capacity_samples")
    hour = models.DateTimeField(help_text="The start of the hour the figure stands for.")
    size = models.CharField(max_length=10)
    cores = models.FloatField()
    memory_bytes = models.FloatField()
    count = models.IntegerField()
    count_n1 = models.IntegerField(help_text="Keeping every node N+1-safe.")
    limited_by_n1 = models.JSONField(default=dict, help_text="Per reason, the nodes that refused the next one.")

    class Meta:
        ordering = ["cluster", "hour", "size"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hour", "size"], name="one_capacity_figure_an_hour")]


class PowerDown(models.Model):
    """A node an admin powers down (dashboard/power.py): it drains through its maintenance, then
    the source shuts it down (Proxmox) or the admin powers it off by hand, and it is standby.

        draining (in maintenance; its evacuation runs) → emptied (no source shutdown: the admin
        powers it off and marks it standby) → standby; draining → cancelled (left maintenance)
    """

    STATES = ["draining", "emptied", "standby", "cancelled"]
    OPEN = ["draining", "emptied"]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="power_downs")
    node = models.CharField(max_length=100)
    state = models.CharField(max_length=10, choices=[(s, s) for s in STATES], default="draining")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    changed_at = models.DateTimeField(default=timezone.now)
    note = models.TextField(blank=True, help_text="What happens next, or why the shutdown failed.")

    class Meta:
        ordering = ["-requested_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "node"],
                condition=models.Q(state__in=["draining", "emptied"]),
                name="one_open_power_down_per_node",
            )
        ]

    def __str__(self) -> str:
        return f"power-down of {self.node} ({self.state})"
