"""Storing a plan as recommendations, and deciding on them: what approving or rejecting one step does to the others.

A step was computed on the snapshot with the steps it is `after` applied, so its math
holds only with them: approving step n approves the steps it was computed behind (first
first), and rejecting it expires the steps computed behind it (the steps before it stay;
the moves after them are planned once they are decided).
The page's buttons, the JSON API and the automation levels all decide through here.
"""

from typing import cast

import crs.containers
import crs.precedence
from crs.decision import total_gain
from crs.model import Snapshot

from . import expiry
from .models import AuditEvent, Cluster, Migration, Policy, priority


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


def approve_by_automation(steps: list[Migration], policy: Policy) -> list[int]:
    """The automation level decides for a new plan: `automatic` approves every step,
    `partial` the steps whose own gain clears the automatic margin (with the steps they
    were computed behind), `manual` none."""
    details = {"automation": policy.automation}
    approved: list[int] = []
    for step in steps:
        if policy.approves_itself(step.relative_gain) and step.pk not in approved:
            step.refresh_from_db()
            approved += approve(step, None, automatic=True, details=details)
    return approved


def store_plan(
    cluster: Cluster,
    snapshot: Snapshot,
    steps,
    *,
    kind: str,
    margin: float,
    method: str,
    details: dict,
    explanations: tuple[str, ...] = (),
) -> list[Migration]:
    """A plan of any kind as recommendations, one per step, in plan order; each audited.

    Owed moves (evacuation, failback, rule fix) are priority 1 and carry why they are owed;
    the others are graded by their step's gain. A step that moves a container says its restart's
    downtime (`snapshot` holds the guests' kind and size)."""
    number = (cluster.migrations.exclude(plan=None).order_by("-plan").values_list("plan", flat=True).first() or 0) + 1
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
            downtime=crs.containers.restart_downtime_s([snapshot.guest(sid) for sid in move.guests]),
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


def owe(
    cluster: Cluster, snapshot: Snapshot, steps, reasons: tuple[str, ...], kind: str, at_once: bool = False
) -> tuple[list[int], list[int]]:
    """An owed plan (evacuation, failback, rule fix; or a power-down's consolidation, which is
    graded, not priority 1): stored as recommendations that say why (owed ones priority 1), the
    pending moves of lower kinds expire (they were computed without it), and it is
    approved when the automation is automatic or partial (Policy.approves_owed) or the admin
    asked for it at once; never during an emergency stop. Returns (migrations changed,
    migrations approved)."""
    if not steps:
        return [], []
    policy = cluster.policy
    created = store_plan(
        cluster, snapshot, steps, kind=kind, margin=0.0, method=policy.method, details={}, explanations=reasons
    )
    changed = [m.pk for m in created] + expiry.outranked(cluster, kind, cast(int, created[0].plan), reasons[0])
    approved: list[int] = []
    if not cluster.stopped and (policy.approves_owed() or at_once):
        details = {"at_once": True} if at_once else {"automation": policy.automation}
        for m in created:
            m.refresh_from_db()
            if m.state == "suggested":
                approved += approve(m, None, automatic=True, details=details)
    return changed, approved
