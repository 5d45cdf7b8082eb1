"""A person's decisions: approve one recommendation (with the steps it was computed behind),
apply all of a cluster's, reject one, mark a running migration failed, the emergency stop.
The page and the REST API both call these, so both check the same things and start the same
migrations.
"""

from django.db import transaction

from . import emergency, plans, tasks
from .models import Cluster, Migration


def approve_migration(migration: Migration, user) -> tuple[str, list[int]]:
    """A person approves a pending recommendation and the steps it was computed behind (the page
    and the REST API alike); a step that no longer fits the latest snapshot expires instead, with
    the reason. Returns why nothing of its cluster can be migrated at all ("" when tried), and
    the migrations this call approved (a click that came second approved none)."""
    if refusal := not_migratable(migration.cluster):
        return refusal, []
    with transaction.atomic():
        approved = plans.approve(migration, user)
        tasks.after_decision(approved, approved + [migration.pk])
    return "", approved


def apply_all(cluster: Cluster, user) -> tuple[list[Migration], dict[int, str]]:
    """Apply all: every pending recommendation of a migratable cluster, plan by plan in plan
    order, each re-checked on the latest snapshot. Returns the migrations approved and, for each
    pending one that was not, why. The caller has checked `not_migratable`."""
    pending = list(cluster.migrations.filter(state="suggested").order_by("plan", "step").values_list("pk", flat=True))
    with transaction.atomic():
        approved = plans.approve_all(cluster, user)
        tasks.after_decision(approved, approved)
    migrations = Migration.objects.filter(pk__in=pending).select_related("decided_by").order_by("plan", "step")
    refused = {m.pk: decision_conflict(m, "approved") for m in migrations if m.pk not in approved}
    return [m for m in migrations if m.pk in approved], refused


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


def fail_migration(pk: int, user) -> tuple[Migration, str]:
    """An operator settles a running migration by hand: its follower is lost and the adapter cannot
    say, or the operator knows better. Audited with the operator as actor; a no-op unless running.
    Returns the migration and "" or why nothing changed."""
    reason = f"marked failed by {user.get_username()}; the adapter's task was not stopped"
    with transaction.atomic():
        marked = Migration.objects.transition(pk, "running", "failed", user, reason=reason)
        tasks.after_decision([], [pk] if marked else [])
    migration = Migration.objects.select_related("decided_by").get(pk=pk)
    return migration, "" if marked else f"migration {pk} is {migration.state}, not running"


def toggle_stop(cluster: Cluster, user, stop: bool) -> dict:
    """The emergency stop of one cluster set (automation paused, approved moves expire, running
    ones aborted) or lifted; what it did."""
    if not stop:
        emergency.lift(cluster, user)
        return {"stopped": False}
    with transaction.atomic():
        stopped = emergency.stop(cluster, user)
        tasks.after_decision([], stopped["expired"])
    return {"stopped": True, **stopped}
