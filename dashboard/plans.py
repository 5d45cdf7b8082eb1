"""Storing a plan as recommendations, one per step in plan order, and holding an approved step.

The round stores the plans the engine decided (rounds.apply); a person decides on their
steps through approvals.py, the executor holds a step that must wait (executor.held).
"""

import crs.containers
import crs.precedence
import crs.priority
from crs.decision import total_gain
from crs.model import Snapshot

from .models import AuditEvent, Cluster, Migration


def hold(cluster: Cluster, migration: Migration, reason: str) -> None:
    """An approved `migration` that must not start now (executor.held):
    it stays approved and says what it waits for in its `reason` (the page's row and the API);
    the trail says it once per reason (a conditional UPDATE: rounds queue it again and again)."""
    if Migration.objects.filter(pk=migration.pk, state="approved").exclude(reason=reason).update(reason=reason):
        AuditEvent.objects.create(
            actor=None, action="start-held", cluster=cluster, migration_id=migration.pk, details={"reason": reason}
        )


def store_plan(
    cluster: Cluster,
    snapshot: Snapshot,
    steps,
    *,
    kind: str,
    number: int | None = None,
    margin: float,
    method: str,
    details: dict,
    explanations: tuple[str, ...] = (),
) -> list[Migration]:
    """A plan of any kind as recommendations, one per step, in plan order; each audited.

    Owed moves (evacuation, failback, rule fix) are priority 1 and carry why they are owed;
    the others are graded by their step's gain. A step that moves a container says its restart's
    downtime (`snapshot` holds the guests' kind and size). `number`: the plan's, as the round
    decided it; by default the next free one."""
    number = (
        number
        or (cluster.migrations.exclude(plan=None).order_by("-plan").values_list("plan", flat=True).first() or 0) + 1
    )
    gain = total_gain(steps)
    owed = kind in crs.precedence.MANDATORY
    created = []
    for index, step in enumerate(steps):
        move = step.move
        migration = Migration.objects.create(
            cluster=cluster,
            leader=move.leader,
            guests=list(move.guests),
            source=move.source,
            target=move.target,
            imbalance_before=step.imbalance_before,
            imbalance_after=step.imbalance_after,
            relative_gain=step.gain,
            margin=margin,
            method=method,
            plan=number,
            step=index,
            after=step.after,
            plan_gain=gain,
            alternatives=list(step.alternatives),
            priority=crs.priority.priority(step.gain, owed),
            kind=kind,
            explanation=explanations[index] if explanations else "",
            downtime_s=crs.containers.restart_downtime_s([snapshot.guest(sid) for sid in move.guests]),
            payoff=move.payoff.to_dict() if move.payoff is not None else None,
        )
        AuditEvent.objects.create(
            actor=None,
            action="suggested",
            cluster=cluster,
            migration=migration,
            details={"plan": number, "step": index, "after": step.after, "kind": kind, **details}
            | ({"why": migration.explanation} if migration.explanation else {}),
        )
        created.append(migration)
    return created
