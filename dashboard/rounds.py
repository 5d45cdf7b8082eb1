"""Storing a round's result: the trend sample, the hold counter, the suggestion and who approves it.

The engine decides; this module only records. One suggestion is pending per cluster at a
time: a newer round's move supersedes it, and it expires when the round no longer supports
it or nobody decides within the suggestion expiry.
"""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

import crs.usage
from crs.decision import RoundResult
from crs.model import Snapshot

from . import live
from .models import AuditEvent, Cluster, Migration, Round

# Decisions that mean "no move is worth making now". Not `holding`: the engine restarts the
# hold after every suggestion, and the imbalance is still above the threshold meanwhile.
NO_LONGER_WARRANTED = frozenset({"below-threshold", "below-margin", "no-candidate"})


def node_usage(snapshot: Snapshot, result: RoundResult) -> dict:
    """Per node: measured CPU and memory utilisation (the bars) and the engine's load for the mode."""
    return {
        s.name: {"cpu": s.cpu_load, "memory": s.mem_load, "load": result.node_loads.get(s.name, 0.0)}
        for s in crs.usage.node_stats(snapshot, "dynamic")
    }


def record(cluster: Cluster, snapshot: Snapshot, result: RoundResult, duration: float | None = None) -> None:
    """Persist one round and queue its pushes (and an automatic approval) for after commit.

    `duration`: the seconds the engine took (parse and round), for /metrics."""
    from .tasks import execute  # tasks import this module

    policy = cluster.policy
    now = timezone.now()
    with transaction.atomic():
        round_ = Round.objects.create(
            cluster=cluster,
            at=now,
            imbalance=result.imbalance,
            threshold=policy.threshold / 100.0,
            decision=result.decision,
            hold_count=result.state.hold_count,
            explanation=result.explanation.to_dict(),
            node_usage=node_usage(snapshot, result),
            duration=duration,
        )
        Cluster.objects.filter(pk=cluster.pk).update(hold_count=result.state.hold_count, last_round_at=now)
        cluster.rounds.filter(at__lt=now - timedelta(hours=settings.CRS_HISTORY_KEEP_HOURS)).delete()
        changed = expire_outdated(cluster, result) if result.decision in NO_LONGER_WARRANTED else []
        changed += expire_overdue(cluster, now)
        suggestion, superseded = suggest(cluster, result) if result.decision == "migrate" else (None, [])
        if suggestion and policy.approves_itself(suggestion.relative_gain):
            Migration.objects.transition(
                suggestion.pk, "suggested", "approved", None, automatic=True, details={"automation": policy.automation}
            )
            transaction.on_commit(lambda: execute.delay(suggestion.pk), robust=True)  # Redis down: rounds retry
        transaction.on_commit(lambda: live.push(cluster.pk, live.round_payload(round_, policy.hold_duration)))
        for pk in changed + superseded + ([suggestion.pk] if suggestion else []):
            transaction.on_commit(lambda pk=pk: live.push_migration(pk))


def suggest(cluster: Cluster, result: RoundResult) -> tuple[Migration | None, list[int]]:
    """A new suggestion from the round's move, and the older pending ones it supersedes.

    None while the migrations already approved or running fill the cluster's slots (the
    next best move depends on them), or when the pending suggestion is this same move.
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
    return migration, expire(older, f"superseded by suggestion #{migration.pk}, from a newer round")


def expire_overdue(cluster: Cluster, now) -> list[int]:
    """Suggestions nobody decided on within the suggestion expiry: the data they rest on is old."""
    minutes = cluster.policy.suggestion_expiry
    overdue = cluster.migrations.filter(state="suggested", suggested_at__lt=now - timedelta(minutes=minutes))
    reason = f"not decided within the suggestion expiry of {minutes} minutes"
    return expire(overdue.values_list("pk", flat=True), reason)


def expire_outdated(cluster: Cluster, result: RoundResult) -> list[int]:
    """Suggestions the latest round no longer supports (below threshold or margin, ...) expire."""
    pending = cluster.migrations.filter(state="suggested").values_list("pk", flat=True)
    return expire(pending, f"no longer suggested: {result.explanation.reason}", {"decision": result.decision})


def expire(pks, reason: str, details: dict | None = None) -> list[int]:
    """suggested → expired for each of `pks` still pending; the ones this call expired."""
    return [pk for pk in pks if Migration.objects.transition(pk, "suggested", "expired", None, details, reason=reason)]
