"""Change windows and blackouts (the gate itself is crs.windows, applied by dashboard/automation.py)."""

from django.core.exceptions import ValidationError
from django.db import models

from .validators import printable_name

WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def weekdays(value) -> None:
    if not isinstance(value, list) or not value or any(not isinstance(d, int) or not 0 <= d <= 6 for d in value):
        raise ValidationError("days must be a non-empty list of weekdays 0 (Monday) … 6 (Sunday)")


class ChangeWindow(models.Model):
    """A weekly window in which `automatic` and `partial` automation may start balancing moves,
    in wall-clock time of the cluster's time zone (Policy.time_zone). With none, any time may."""

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="change_windows")
    days = models.JSONField(validators=[weekdays], help_text="Weekdays it starts on: 0 = Monday … 6 = Sunday.")
    start = models.TimeField(help_text="From (wall clock, the cluster's time zone).")
    end = models.TimeField(help_text="To; at or before `start` it ends the next day (22:00–06:00).")

    class Meta:
        ordering = ["cluster", "start", "pk"]

    def __str__(self) -> str:
        days = ",".join(WEEKDAYS[d] for d in sorted(self.days or []))
        return f"{days} {self.start:%H:%M}–{self.end:%H:%M}"

    def clean(self) -> None:
        if self.start is not None and self.start == self.end:
            raise ValidationError({"end": "end must differ from start (a window of no time)"})


class Blackout(models.Model):
    """A one-off interval without automatic balancing moves, e.g. "backups Sunday 01:00–04:00"."""

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="blackouts")
    label = models.CharField(max_length=100, validators=[printable_name], help_text="Why, e.g. 'backups'.")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "starts_at", "pk"]

    def __str__(self) -> str:
        return f"{self.label} {self.starts_at:%Y-%m-%d %H:%M}–{self.ends_at:%H:%M} UTC"

    def clean(self) -> None:
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            raise ValidationError({"ends_at": "ends_at must be after starts_at"})
