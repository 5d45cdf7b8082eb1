"""A round on the web side: load its inputs from the rows, let the engine decide, apply the outcome.

The engine (crs.round.decide) decides everything a round decides; this module only reads
what it needs (`inputs`) and records what it decided (`apply`), in one transaction through
the migration state machine, and says what it did (`Recorded`) so that its caller
(tasks.balancing_round) pushes it and starts what was approved once it is committed.
"""

import time
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

import crs.forecast
import crs.happiness
import crs.round
import crs.trail
import crs.usage
from crs.decision import RoundState
from crs.model import Snapshot
from crs.owed import Maintenance as OpenMaintenance
from crs.planned import PlannedMove

from . import automation, events, forecasts, overview, plans
from .models import AuditEvent, Cluster, Maintenance, Migration, RollingNode, Round


@dataclass(frozen=True)
class Recorded:
    """What recording one round did, for its caller to announce after commit."""

    round: Round
    changed: list[int]  # migrations created or moved on (expired, approved): pushed to the page
    approved: list[int]  # recommendations the round approved itself: to execute


def run(cluster: Cluster, snapshot: Snapshot, started: float | None = None) -> Recorded:
    """One round: load, decide, apply. `started`: time.monotonic() when the round began, for /metrics."""
    now = timezone.now()
    snapshot = forecasts.applied(cluster.pk, snapshot, now)  # each guest's next-hour peak, when the setting is on
    outcome = crs.round.decide(inputs(cluster, snapshot, now))
    duration = time.monotonic() - started if started is not None else None
    return apply(cluster, snapshot, outcome, now, duration)


def inputs(cluster: Cluster, snapshot: Snapshot, now: datetime) -> crs.round.RoundInputs:
    """Everything the engine needs to decide this cluster's round, read from its rows."""
    policy = cluster.policy
    live = cluster.migrations.filter(state__in=["suggested", "approved", "running"]).order_by("plan", "step")
    last_plan = cluster.migrations.exclude(plan=None).order_by("-plan").values_list("plan", flat=True).first()
    at_once = RollingNode.objects.filter(
        rolling__cluster=cluster, rolling__state__in=("running", "paused"), rolling__at_once=True, step="draining"
    ).values_list("node", flat=True)
    return crs.round.RoundInputs(
        snapshot=snapshot,
        state=RoundState(cluster.hold_count, **cluster.pressure_gate),
        moves=tuple(planned(m) for m in live),
        maintenances=tuple(
            OpenMaintenance(
                m.node,
                tuple(m.guests),
                m.at_once,
                seen=cluster.collected_at is not None and cluster.collected_at > m.entered_at,
                left_here=m.left_by_id is not None,
            )
            for m in cluster.maintenances.filter(left_at=None)
        ),
        powering_down=frozenset(cluster.power_downs.filter(state="draining").values_list("node", flat=True)),
        at_once_nodes=frozenset(at_once),
        proxmox_ha=cluster.is_proxmox,
        guards=cluster.guards(),
        automation=automation.state(cluster, now),
        recommendation_expiry=policy.recommendation_expiry,
        next_plan=(last_plan or 0) + 1,
        now=now,
    )


def planned(m: Migration) -> PlannedMove:
    return PlannedMove(
        m.pk, m.plan, m.step or 0, m.after, m.kind, m.state, m.as_move(), m.suggested_at, m.automatic, m.reason
    )


def apply(
    cluster: Cluster, snapshot: Snapshot, outcome: crs.round.Outcome, now: datetime, duration: float | None
) -> Recorded:
    """Record the outcome in one transaction: maintenances, plans, expiries, approvals, the round."""
    with transaction.atomic():
        _maintenances(cluster, outcome, now)
        created: dict[tuple[int, int], int] = {}
        for plan in outcome.plans:
            details: dict = {"explanation": outcome.result.explanation.to_dict()} if not plan.reasons else {}
            stored = plans.store_plan(
                cluster,
                snapshot,
                plan.steps,
                number=plan.number,
                kind=plan.kind,
                margin=plan.margin,
                method=plan.method or cluster.policy.method,
                details=details,
                explanations=plan.reasons,
            )
            created |= {(plan.number, i): m.pk for i, m in enumerate(stored)}

        def pk(move: PlannedMove) -> int:
            return move.id if move.id is not None else created[(move.plan or 0, move.step)]

        changed = list(created.values())
        for e in outcome.expired:
            if Migration.objects.transition(
                pk(e.move), e.move.state, "expired", None, e.details or None, reason=e.reason
            ):
                changed.append(pk(e.move))
        approved = []
        for m in outcome.approved:
            details = outcome.approve_details[(m.id, m.plan, m.step)]
            if Migration.objects.transition(pk(m), "suggested", "approved", None, details, automatic=True):
                approved.append(pk(m))
        _trail(cluster, outcome)
        round_ = _round(cluster, snapshot, outcome, now, duration)
    return Recorded(round_, changed + [p for p in approved if p not in changed], approved)


def _maintenances(cluster: Cluster, outcome: crs.round.Outcome, now: datetime) -> None:
    for m in outcome.opened:  # entered at the source (Proxmox's CLI)
        guests = list(m.guests)
        Maintenance.objects.create(cluster=cluster, node=m.node, guests=guests, at_once=m.at_once)
        details = {"node": m.node, "guests": guests, "at_once": m.at_once}
        AuditEvent.objects.create(actor=None, action="maintenance-entered", cluster=cluster, details=details)
    for m in outcome.closed:
        cluster.maintenances.filter(node=m.node, left_at=None).update(left_at=now)
        if not m.left_here:  # left at the source (Proxmox's CLI), not from here
            AuditEvent.objects.create(actor=None, action="maintenance-left", cluster=cluster, details={"node": m.node})


def _trail(cluster: Cluster, outcome: crs.round.Outcome) -> None:
    """The round's audit events (crs.trail decides), from what the trail already says (only the
    part the outcome needs is read: crs.trail.reads)."""
    previous = crs.trail.Previous()
    if (needed := crs.trail.reads(outcome)) == "kept":
        logged = cluster.audit_events.filter(action="waiting", details__kept_plan=outcome.kept_plan).exists()
        previous = crs.trail.Previous(kept_logged=logged)
    elif needed == "waiting":
        previous = crs.trail.Previous(waiting=last_waiting(cluster))
    for action, details in crs.trail.events(outcome, previous):
        AuditEvent.objects.create(actor=None, action=action, cluster=cluster, details=details)


def last_waiting(cluster: Cluster) -> str:
    last = cluster.rounds.order_by("-at").values_list("explanation", flat=True).first()
    return (last or {}).get("waiting", "")


def _round(
    cluster: Cluster, snapshot: Snapshot, outcome: crs.round.Outcome, now: datetime, duration: float | None
) -> Round:
    """The trend sample, the round status and the state the next round starts from."""
    result = outcome.result
    round_ = Round.objects.create(
        cluster=cluster,
        at=now,
        imbalance=result.imbalance,
        threshold=cluster.policy.threshold,
        decision=result.decision,
        hold_count=result.explanation.hold_count,
        explanation=outcome.explanation,
        node_usage=node_usage(snapshot),
        duration_s=duration,
        happiness=crs.happiness.of_cluster(snapshot).share,
    )
    events.round_recorded.send(Round, round_=round_)  # "imbalance above the threshold for longer than …"
    s = result.state
    Cluster.objects.filter(pk=cluster.pk).update(
        hold_count=s.hold_count,
        last_round_at=now,
        trend=overview.trend_after(cluster.trend, now, result.imbalance),
        pressure_gate={
            "checked_s": s.checked_s,
            "changed_s": s.changed_s,
            "digest": s.digest,
            "stalled_nodes": list(s.stalled_nodes),
            "short_s": s.short_s,
        },
    )
    return round_


def node_usage(snapshot: Snapshot) -> dict:
    """Per node: measured CPU and memory utilisation, the page's bars, and where the forecast
    sees them peak within the next hour (the bars' markers; only nodes with a forecast guest)."""
    peaks = crs.forecast.node_peaks(snapshot)
    out: dict[str, dict] = {}
    for s in crs.usage.node_stats(snapshot, "dynamic"):
        out[s.name] = {"cpu": s.cpu_load, "memory": s.mem_load}
        if s.name in peaks:
            out[s.name]["forecast"] = {"cpu": peaks[s.name][0], "memory": peaks[s.name][1]}
    return out
