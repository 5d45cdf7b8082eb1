"""Expiry: why a recommendation, or an approved migration not yet started, stops waiting.

The causes (each sets the migration's reason), named here:

* replaced    — the pending plan no longer holds on fresh data (crs.verdict: a step became
                illegal or pointless, its total gain fell below the margin) or a new plan
                is better by at least the margin; decided by the round (crs.round);
* overdue     — nobody decided within the recommendation expiry (crs.round);
* behind_rejected — a step computed behind a rejected step (re-planned once the steps before
                it are decided: they stay);
* stopped     — an emergency stop;
* stale       — at approval, the cluster's latest snapshot no longer allows it (guest moved,
                cooldown, rule, ...): the engine names what changed;
* stale_at_start — the same check on a fresh snapshot taken just before it starts;
* unverifiable — no fresh snapshot could be taken to re-check it before it starts;
* outranked   — a plan of a higher kind (evacuation > rule fix > pressure relief >
                balancing, crs.precedence) took over: the lower kind's pending moves go
                (crs.round);
* maintenance ended — the node an evacuation was emptying left maintenance (maintenance.leave
                when an admin takes it out; crs.owed when a round sees it back).

A recommendation expires from `suggested`, an approved migration from `approved`; both
through Migration.objects.transition, so each expiry is audited once.
"""

from .models import Cluster, Migration


def behind_rejected(migration: Migration) -> list[int]:
    """The steps computed behind a rejected step: their math assumed it. The steps before it
    stay (crs.verdict); a plan after them is made once they are decided."""
    later = [m.pk for m in migration.dependents() if m.state == "suggested"]
    return _expire(
        later, f"computed after #{migration.pk}, which was rejected; re-planned once the moves before it are decided"
    )


def stopped(cluster: Cluster, actor) -> list[int]:
    """Emergency stop: every approved migration not yet started expires."""
    pks = cluster.migrations.filter(state="approved").values_list("pk", flat=True)
    reason = "emergency stop: automation paused"
    return [pk for pk in pks if Migration.objects.transition(pk, "approved", "expired", actor, reason=reason)]


def stale(migration: Migration, actor) -> bool:
    """At approval: expire it (True) if the cluster's latest snapshot no longer allows the move."""
    reason = migration.stale_reason(migration.cluster.latest_snapshot())
    return bool(reason) and Migration.objects.transition(migration.pk, "suggested", "expired", actor, reason=reason)


def stale_at_start(migration_id: int, reason: str) -> bool:
    """Just before it starts: expire an approved migration (True) that a fresh snapshot no longer
    allows, for the engine's `reason` (crs.starts.decide)."""
    return Migration.objects.transition(migration_id, "approved", "expired", None, reason=reason)


def unverifiable(migration_id: int, error: Exception) -> bool:
    """Just before it starts: no fresh snapshot to re-check it against, so it is not started."""
    reason = f"could not re-check it on a fresh snapshot: {error}"
    return Migration.objects.transition(migration_id, "approved", "expired", None, reason=reason)


def _expire(pks, reason: str, details: dict | None = None) -> list[int]:
    """suggested → expired for each of `pks` still pending; the ones this call expired."""
    return [pk for pk in pks if Migration.objects.transition(pk, "suggested", "expired", None, details, reason=reason)]
