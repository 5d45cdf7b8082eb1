"""Applying an engine machine's changes (crs.machine): what rolling maintenance and power-downs share.

The engine's next-state function decides; this takes each Change as one conditional UPDATE (the
row still in the change's `before`), so a round and a request advancing at once take a step
once, and only the caller whose UPDATE took it writes its audit event.
"""

from django.db.models import QuerySet
from django.utils import timezone

from crs.machine import Change, Machine

from .models import AuditEvent


def take(rows: QuerySet, column: str, change: Change, stamp: str | None = "changed_at") -> bool:
    """The conditional UPDATE that takes `change` on `rows` (one subject's row): True for the
    one caller that took it. `column` holds the machine's state; `stamp`, when the step was taken."""
    now = {stamp: timezone.now()} if stamp else {}
    return bool(rows.filter(**{column: change.before}).update(**{column: change.after}, **now, **change.fields))


def step(machine: Machine, rows: QuerySet, column: str, before: str, after: str, **kwargs) -> bool:
    """A step an admin asks for (not the next-state function's): checked against `machine`, then
    taken as `take` takes it (`kwargs`: `stamp`, and the other columns it sets)."""
    stamp = kwargs.pop("stamp", "changed_at")
    return take(rows, column, machine.change("", before, after, "", fields=kwargs), stamp)


def audit(cluster_id: int, actor, action: str, **details) -> None:
    """The audit event of a step, without the details that say nothing (None)."""
    kept = {k: v for k, v in details.items() if v is not None}
    AuditEvent.objects.create(actor=actor, action=action, cluster_id=cluster_id, details=kept)
