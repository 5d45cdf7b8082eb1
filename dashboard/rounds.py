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

import crs.usage
from crs.decision import RoundResult, total_gain
from crs.model import Snapshot

from . import expiry, plans
from .models import AuditEvent, Cluster, Migration, Round, priority


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
        pending = list(cluster.migrations.filter(state="suggested").order_by("plan", "step"))
        if pending and (reason := expiry.verdict(cluster, snapshot, pending, result)):
            changed += expiry.replaced(pending, reason)
            pending = []
        waiting = waiting_reason(cluster, pending)
        if result.decision == "migrate" and waiting and waiting != last_waiting(cluster):
            # The trail says what blocked a plan, once per change rather than every round.
            AuditEvent.objects.create(actor=None, action="waiting", cluster=cluster, details={"reason": waiting})
        new = []
        if result.decision == "migrate" and not waiting:
            new = recommend(cluster, result)
            changed += [m.pk for m in new]
        approved = []
        if new and not cluster.stopped:
            approved = plans.approve_by_automation(new, policy)
        explanation = {**result.explanation.to_dict(), "waiting": waiting, "plan": new[0].plan if new else None}
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
        )
        Cluster.objects.filter(pk=cluster.pk).update(hold_count=result.state.hold_count, last_round_at=now)
    return Recorded(round_, changed + [pk for pk in approved if pk not in changed], approved)


def waiting_reason(cluster: Cluster, pending: list[Migration]) -> str:
    """What keeps this round from recommending a new plan, as the page, the API and the trail say it; "" = nothing."""
    if cluster.stopped:
        return "emergency stop: automation is paused until it is lifted"
    busy = list(cluster.migrations.filter(state__in=["approved", "running"]).order_by("plan", "step"))
    if busy:
        listed = ", ".join(f"#{m.pk} {m.state}" for m in busy)
        return f"a plan is running ({listed}): no new balancing plan until it finishes"
    if pending:
        count = len(pending)
        return f"plan {pending[0].plan} still holds on fresh data ({count} recommendations waiting for a decision)"
    return ""


def last_waiting(cluster: Cluster) -> str:
    last = cluster.rounds.order_by("-at").values_list("explanation", flat=True).first()
    return (last or {}).get("waiting", "")


def recommend(cluster: Cluster, result: RoundResult) -> list[Migration]:
    """The round's plan as recommendations, one per step, ranked in plan order; each audited."""
    number = (cluster.migrations.exclude(plan=None).order_by("-plan").values_list("plan", flat=True).first() or 0) + 1
    gain = total_gain(result.plan)
    created = []
    for index, step in enumerate(result.plan):
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
            margin=result.explanation.margin,
            method=result.explanation.method,
            plan=number,
            step=index,
            after=step.after,
            plan_gain=gain,
            alternatives=list(step.alternatives),
            priority=priority(step.gain),
        )
        AuditEvent.objects.create(
            actor=None,
            action="suggested",
            cluster=cluster,
            migration=migration,
            details={"plan": number, "step": index, "after": step.after, "explanation": result.explanation.to_dict()},
        )
        created.append(migration)
    return created
