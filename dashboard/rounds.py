"""Storing a round's result: the trend sample, the hold counter, the recommendation and who approves it.

The engine decides; this module only records, and says what it did (`Recorded`) so that
its caller (tasks.balancing_round) pushes it and starts what was approved once it is
committed. One recommendation is pending per cluster at a time: a newer round's move
supersedes it, and it expires (expiry.py) when the round no longer supports it or
nobody decides within the recommendation expiry.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import crs.usage
from crs.decision import RoundResult
from crs.model import Snapshot

from . import expiry
from .models import AuditEvent, Cluster, Migration, Round


@dataclass(frozen=True)
class Recorded:
    """What recording one round did, for its caller to announce after commit."""

    round: Round
    changed: list[int]  # migrations created or moved on (expired, approved): pushed to the page
    approved: int | None  # a recommendation the round approved itself: to execute


def node_usage(snapshot: Snapshot) -> dict:
    """Per node: measured CPU and memory utilisation, the page's bars."""
    return {s.name: {"cpu": s.cpu_load, "memory": s.mem_load} for s in crs.usage.node_stats(snapshot, "dynamic")}


def record(cluster: Cluster, snapshot: Snapshot, result: RoundResult, duration: float | None = None) -> Recorded:
    """Persist one round in one transaction: its sample, the hold counter, expiries, the recommendation.

    `duration`: the seconds the engine took (parse and round), for /metrics."""
    policy = cluster.policy
    now = timezone.now()
    with transaction.atomic():
        round_ = Round.objects.create(
            cluster=cluster,
            at=now,
            imbalance=result.imbalance,
            threshold=policy.threshold,
            decision=result.decision,
            hold_count=result.explanation.hold_count,
            explanation=result.explanation.to_dict(),
            node_usage=node_usage(snapshot),
            duration=duration,
        )
        Cluster.objects.filter(pk=cluster.pk).update(hold_count=result.state.hold_count, last_round_at=now)
        cluster.rounds.filter(at__lt=now - timedelta(hours=settings.CRS_HISTORY_KEEP_HOURS)).delete()
        changed = expiry.outdated(cluster, result) + expiry.overdue(cluster, now)
        new, older = recommend(cluster, result) if result.decision == "migrate" else (None, [])
        if new is None:
            return Recorded(round_, changed, None)
        changed += expiry.superseded(older, new) + [new.pk]
        automatic = policy.approves_itself(new.relative_gain) and Migration.objects.transition(
            new.pk, "suggested", "approved", None, automatic=True, details={"automation": policy.automation}
        )
    return Recorded(round_, changed, new.pk if automatic else None)


def recommend(cluster: Cluster, result: RoundResult) -> tuple[Migration | None, list[int]]:
    """A new recommendation from the round's move, and the older pending ones it supersedes.

    None while the migrations already approved or running fill the cluster's slots (the
    next best move depends on them), or when the pending recommendation is this same move.
    """
    move = result.move
    busy = cluster.migrations.filter(state__in=["approved", "running"]).count()
    pending = cluster.migrations.filter(state="suggested")
    if (
        busy >= cluster.policy.max_concurrent_migrations
        or pending.filter(leader=move.leader, source=move.source, target=move.target).exists()
    ):
        return None, []
    older = list(pending.values_list("pk", flat=True))
    migration = Migration.objects.create(
        cluster=cluster,
        leader=move.leader,
        guests=list(move.guests),
        source=move.source,
        target=move.target,
        imbalance_before=result.imbalance,
        imbalance_after=move.imbalance_after,
        relative_gain=move.relative_gain,
        margin=result.explanation.margin,
        method=result.explanation.method,
    )
    AuditEvent.objects.create(
        actor=None,
        action="suggested",
        cluster=cluster,
        migration=migration,
        details={"explanation": result.explanation.to_dict()},
    )
    return migration, older
