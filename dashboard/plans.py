"""Storing a plan as recommendations, and deciding on them: what approving or rejecting one step does to the others.

A step was computed on the snapshot with the steps it is `after` applied, so its math
holds only with them: approving step n approves the steps it was computed behind (first
first), and rejecting it expires the steps computed behind it (the steps before it stay;
the moves after them are planned once they are decided).
The page's buttons and the JSON API decide through here; the round's automation decides in
the engine (crs.round) and records through the same state machine (rounds.apply).
"""

import crs.containers
import crs.precedence
from crs.decision import total_gain
from crs.model import Snapshot

from . import expiry
from .models import AuditEvent, Cluster, Migration, priority


def approve(migration: Migration, actor, automatic: bool = False, details: dict | None = None) -> list[int]:
    """Approve `migration` and the suggested steps it was computed behind, in plan order.

    Each is re-checked on the latest snapshot first (a stale one expires, and the steps
    after it stay pending). Returns the migrations this call approved.
    """
    approved = []
    for step in [*migration.behind(), migration]:
        if step.state in ("approved", "running", "done"):
            continue
        if step.state != "suggested" or (not automatic and expiry.stale(step, actor)):
            break
        who = {} if automatic else {"decided_by": actor}
        if not Migration.objects.transition(
            step.pk, "suggested", "approved", actor, details, automatic=automatic, **who
        ):
            break
        approved.append(step.pk)
    return approved


def approve_all(cluster, actor) -> list[int]:
    """Apply all: every pending recommendation of the cluster, plan by plan, in plan order."""
    approved = []
    for migration in cluster.migrations.filter(state="suggested").order_by("plan", "step"):
        migration.refresh_from_db()
        if migration.state == "suggested":
            approved += approve(migration, actor)
    return approved


def reject(migration: Migration, actor, reason: str) -> list[int]:
    """Reject one step with its reason (the rejection memory bars the move); the steps
    computed behind it expire. Returns the migrations this call changed."""
    if not Migration.objects.transition(migration.pk, "suggested", "rejected", actor, decided_by=actor, reason=reason):
        return []
    return [migration.pk, *expiry.behind_rejected(migration)]


def hold(cluster: Cluster, migration: Migration, reason: str) -> None:
    """An approved `migration` that must not start now (windows.hold_start, rolling.hold_start):
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
            priority=1 if owed else priority(step.gain),
            kind=kind,
            explanation=explanations[index] if explanations else "",
            downtime_s=crs.containers.restart_downtime_s([snapshot.guest(sid) for sid in move.guests]),
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
