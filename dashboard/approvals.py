"""A person's decisions on recommendations: approve one (with the steps it was computed behind),
apply all of a cluster's, reject one. The page and the REST API both call these, so both check
the same things and start the same migrations.
"""

from django.db import transaction

from . import plans, tasks
from .models import Cluster, Migration


def approve_migration(migration: Migration, user) -> str:
    """A person approves a pending recommendation and the steps it was computed behind (the page
    and the REST API alike); a step that no longer fits the latest snapshot expires instead, with
    the reason. Returns why nothing of its cluster can be migrated at all, or "" when tried."""
    if refusal := not_migratable(migration.cluster):
        return refusal
    with transaction.atomic():
        approved = plans.approve(migration, user)
        tasks.after_decision(approved, approved + [migration.pk])
    return ""


def approve_all(cluster: Cluster, user) -> list[int]:
    """Apply all: every pending recommendation of the cluster, in plan order; the ones approved.
    The caller has checked `not_migratable`."""
    with transaction.atomic():
        approved = plans.approve_all(cluster, user)
        tasks.after_decision(approved, approved)
    return approved


def not_migratable(cluster: Cluster) -> str:
    """Why nothing of this cluster can be migrated, or ""."""
    if cluster.read_only:
        return f"cluster {cluster.name} is a read-only what-if cluster: nothing is migrated there"
    if cluster.archived:
        return f"cluster {cluster.name} is archived: it runs no rounds and no migrations"
    return ""


def reject_migration(migration: Migration, user, reason: str) -> bool:
    """Reject one step with its reason (the steps computed behind it expire); False when another
    decision came first (this reason is not kept)."""
    with transaction.atomic():
        changed = plans.reject(migration, user, reason)
        tasks.after_decision([], changed)
    return bool(changed)


def decision_conflict(migration: Migration, wanted: str, recorded: bool = True) -> str:
    """Why a decision did not take (someone else decided first, or it expired); "" if it did."""
    if not recorded and migration.state == wanted:
        return f"migration {migration.pk} was {wanted} by someone else first: this decision was not recorded"
    if migration.state == wanted or (wanted == "approved" and migration.state in ("running", "done", "failed")):
        return ""
    reason = f" ({migration.reason})" if migration.reason else ""
    return f"migration {migration.pk} is {migration.state}{reason}, not a pending recommendation"
