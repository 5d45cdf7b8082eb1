"""Expiry: why a recommendation, or an approved migration not yet started, stops waiting.

The six causes, named here and nowhere else (each sets the migration's reason):

* superseded  — a newer round recommends another move;
* overdue     — nobody decided within the recommendation expiry;
* outdated    — the latest round no longer supports a move (below threshold or margin, no candidate);
* stale       — at approval, the cluster's latest snapshot no longer allows it (guest moved,
                cooldown, rule, ...): the engine names what changed;
* stale_at_start — the same check on a fresh snapshot taken just before it starts;
* unverifiable — no fresh snapshot could be taken to re-check it before it starts.

A recommendation expires from `suggested`, an approved migration from `approved`; both
through Migration.objects.transition, so each expiry is audited once.
"""

from crs.decision import RoundResult

from .models import Cluster, Migration

# Decisions that mean "no move is worth making now". Not `holding`: the engine restarts the
# hold after every recommendation, and the imbalance is still above the threshold meanwhile.
NO_LONGER_WARRANTED = frozenset({"below-threshold", "below-margin", "no-candidate"})


def superseded(pks, newer: Migration) -> list[int]:
    return _expire(pks, f"superseded by recommendation #{newer.pk}, from a newer round")


def overdue(cluster: Cluster, now) -> list[int]:
    """Recommendations nobody decided on within the recommendation expiry: the data they rest on is old."""
    expiry = cluster.policy.recommendation_expiry
    late = cluster.migrations.filter(state="suggested", suggested_at__lt=now - expiry)
    return _expire(
        late.values_list("pk", flat=True), f"not decided within the recommendation expiry of {_human(expiry)}"
    )


def outdated(cluster: Cluster, result: RoundResult) -> list[int]:
    """Recommendations the latest round no longer supports, if it supports none."""
    if result.decision not in NO_LONGER_WARRANTED:
        return []
    pending = cluster.migrations.filter(state="suggested").values_list("pk", flat=True)
    return _expire(pending, f"no longer recommended: {result.explanation.reason}", {"decision": result.decision})


def stale(migration: Migration, actor) -> bool:
    """At approval: expire it (True) if the cluster's latest snapshot no longer allows the move."""
    reason = migration.stale_reason(migration.cluster.latest_snapshot())
    return bool(reason) and Migration.objects.transition(migration.pk, "suggested", "expired", actor, reason=reason)


def stale_at_start(migration: Migration, snapshot) -> bool:
    """Just before it starts: expire an approved migration (True) that a fresh snapshot no longer allows."""
    reason = migration.stale_reason(snapshot)
    return bool(reason) and Migration.objects.transition(migration.pk, "approved", "expired", None, reason=reason)


def unverifiable(migration_id: int, error: Exception) -> bool:
    """Just before it starts: no fresh snapshot to re-check it against, so it is not started."""
    reason = f"could not re-check it on a fresh snapshot: {error}"
    return Migration.objects.transition(migration_id, "approved", "expired", None, reason=reason)


def _expire(pks, reason: str, details: dict | None = None) -> list[int]:
    """suggested → expired for each of `pks` still pending; the ones this call expired."""
    return [pk for pk in pks if Migration.objects.transition(pk, "suggested", "expired", None, details, reason=reason)]


def _human(duration) -> str:
    minutes = duration.total_seconds() / 60
    return f"{minutes:g} minutes" if minutes != 1 else "1 minute"
