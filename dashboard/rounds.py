"""Storing a round's result: the trend sample, the hold counter, the plan and who approves it.

The engine decides; this module only records, and says what it did (`Recorded`) so that
its caller (tasks.balancing_round) pushes it and starts what was approved once it is
committed. A round's plan becomes a ranked list of recommendations, one per step. One
plan is pending per cluster at a time and is kept while it holds (expiry.verdict says
when not); while a plan runs, rounds measure but start no new one.
"""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

import crs.happiness
import crs.precedence
import crs.usage
from crs.decision import RoundResult
from crs.model import Snapshot

from . import expiry, maintenance, notify, plans, power, violations, windows
from .models import AuditEvent, Cluster, Migration, Round

# The kinds a balancing round plans itself; owed plans (crs.precedence.MANDATORY) come from
# maintenance.reconcile and violations.reconcile.
BALANCING_KINDS = ("pressure", "balancing")


@dataclass(frozen=True)
class Recorded:
    """What recording one round did, for its caller to announce after commit."""

    round: Round
    changed: list[int]  # migrations created or moved on (expired, approved): pushed to the page
    approved: list[int]  # recommendations the round approved itself: to execute


def node_usage(snapshot: Snapshot) -> dict:
    """Per node: measured CPU and memory utilisation, the page's bars."""
    return {s.name: {"cpu": s.cpu_load, "memory": s.mem_load} for s in crs.usage.node_stats(snapshot, "dynamic")}


def record(cluster: Cluster, snapshot: Snapshot, result: RoundResult, duration: float | None = None) -> Recorded:
    """Persist one round in one transaction: expiries, the plan's recommendations, its sample and hold counter.

    `duration`: the seconds the engine took (parse and round), for /metrics."""
    policy = cluster.policy
    now = timezone.now()
    with transaction.atomic():
        changed = expiry.overdue(cluster, now)
        # Owed plans first (evacuation > rule fix > balancing, crs.precedence): they do not wait.
        evacuations, owed_approved = maintenance.reconcile(cluster, snapshot, power.draining(cluster))
        fixes, fixes_approved, proxmox_fixes = violations.reconcile(cluster, snapshot)
        changed += evacuations + fixes
        owed_approved += fixes_approved
        pending = list(cluster.migrations.filter(state="suggested", kind__in=BALANCING_KINDS).order_by("plan", "step"))
        review = expiry.verdict(cluster, snapshot, pending, result) if pending else expiry.Verdict("")
        if review.replace:
            changed += expiry.replaced(pending, review.replace)
            pending = []
        waiting = waiting_reason(cluster, pending)
        if result.decision == "migrate" and waiting:
            note_waiting(cluster, waiting, review.kept, pending)
        new = []
        if result.decision == "migrate" and not waiting:
            new = recommend(cluster, result, snapshot)
            changed += [m.pk for m in new]
        approved = []
        # A new plan, or a waiting one still valid on fresh data (automation switched on while it
        # waited): approved by the automation level as a new one would be, unless held.
        plan = new or (pending if review.kept else [])
        if plan and not cluster.stopped and policy.automation != "manual":
            if held := windows.held_reason(cluster, now):  # the plan waits for a person instead
                if new:  # said once, when the plan is made
                    details = {"plan": new[0].plan, "reason": held}
                    AuditEvent.objects.create(actor=None, action="automation-held", cluster=cluster, details=details)
            else:
                approved = plans.approve_by_automation(plan, policy)
        approved = owed_approved + approved
        explanation = {
            **result.explanation.to_dict(),
            "waiting": waiting,
            "plan": new[0].plan if new else None,
            "proxmox_fixes": proxmox_fixes,
        }
        if review.kept:  # the status describes the plan the list shows, not the one this round computed
            explanation.update(reason=review.kept, kept_plan=pending[0].plan)
        round_ = Round.objects.create(
            cluster=cluster,
            at=now,
            imbalance=result.imbalance,
            threshold=policy.threshold,
            decision=result.decision,
            hold_count=result.explanation.hold_count,
            explanation=explanation,
            node_usage=node_usage(snapshot),
            duration=duration,
            happiness=crs.happiness.of_cluster(snapshot).share,
        )
        notify.imbalance_measured(round_)  # "imbalance above the threshold for longer than …", after commit
        s = result.state
        Cluster.objects.filter(pk=cluster.pk).update(
            hold_count=s.hold_count,
            last_round_at=now,
            pressure_gate={
                "checked_s": s.checked_s,
                "changed_s": s.changed_s,
                "digest": s.digest,
                "stalled_nodes": list(s.stalled_nodes),
            },
        )
    return Recorded(round_, changed + [pk for pk in approved if pk not in changed], approved)


def waiting_reason(cluster: Cluster, pending: list[Migration]) -> str:
    """What keeps this round from recommending a new plan, as the page, the API and the trail say it; "" = nothing."""
    if cluster.stopped:
        return "emergency stop: automation is paused until it is lifted"
    owed = cluster.migrations.filter(state="suggested", kind__in=crs.precedence.MANDATORY).order_by("plan", "step")
    if first := owed.first():
        what = "an evacuation" if first.kind in ("evacuation", "failback") else "a rule fix"
        return f"{what} goes first (plan {first.plan}, waiting for a decision): no balancing plan until it is done"
    busy = list(cluster.migrations.filter(state__in=["approved", "running"]).order_by("plan", "step"))
    if busy:
        listed = ", ".join(f"#{m.pk} {m.state}" for m in busy)
        # An approved step held by the windows says what it waits for (windows.hold_start).
        held = next((f"; {m.reason}" for m in busy if m.state == "approved" and m.reason), "")
        return f"a plan is running ({listed}): no new balancing plan until it finishes{held}"
    if pending:
        count = len(pending)
        return f"plan {pending[0].plan} still holds on fresh data ({count} recommendations waiting for a decision)"
    return ""


def note_waiting(cluster: Cluster, waiting: str, kept: str, pending: list[Migration]) -> None:
    """The trail says what blocked a new plan: a kept plan once, with its figures on fresh
    data and why it stays; anything else once per change rather than every round."""
    if kept:
        plan = pending[0].plan
        if not cluster.audit_events.filter(action="waiting", details__kept_plan=plan).exists():
            details = {"reason": kept, "kept_plan": plan}
            AuditEvent.objects.create(actor=None, action="waiting", cluster=cluster, details=details)
    elif waiting != last_waiting(cluster):
        AuditEvent.objects.create(actor=None, action="waiting", cluster=cluster, details={"reason": waiting})


def last_waiting(cluster: Cluster) -> str:
    last = cluster.rounds.order_by("-at").values_list("explanation", flat=True).first()
    return (last or {}).get("waiting", "")


def recommend(cluster: Cluster, result: RoundResult, snapshot: Snapshot) -> list[Migration]:
    """The round's plan as recommendations, one per step, ranked in plan order; each audited."""
    kind = "pressure" if result.plan and result.plan[0].move.objective == "pressure" else "balancing"
    return plans.store_plan(
        cluster,
        snapshot,
        result.plan,
        kind=kind,
        margin=result.explanation.margin,
        method=result.explanation.method,
        details={"explanation": result.explanation.to_dict()},
    )
