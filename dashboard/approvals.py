"""A person's decisions: approve one recommendation (with the steps it was computed behind),
apply all of a cluster's, reject one, mark a running migration failed, the emergency stop.
The page and the REST API both call these, so both check the same things and start the same
migrations (events.decided: tasks.py starts them once the decision commits).

A step was computed on the snapshot with the steps it is `after` applied, so its math
holds only with them: approving step n approves the steps it was computed behind (first
first), and rejecting it expires the steps computed behind it (the steps before it stay;
the moves after them are planned once they are decided). The round's automation decides in
the engine (crs.round) and records through the same state machine (rounds.apply).

The emergency stop halts a cluster's balancing, and a second click lifts it: stopping pauses
automation (rounds still measure and recommend, nothing approves itself), expires every
approved migration not yet started, and asks the source to abort the running ones where it
can (the simulator stops them, Proxmox stops the task). A cluster's own stop and "Stop all"'s
are kept apart, so lifting all leaves a stop set on one cluster. Audited both ways, with the
scope ("here" or "all").
"""

import logging
import time

from django.db import transaction
from django.utils import timezone

from crs.errors import CrsError
from crs.sources.base import SourceError

from . import events, expiry
from .models import AuditEvent, Cluster, Migration

log = logging.getLogger(__name__)


def approve_migration(migration: Migration, user) -> tuple[str, list[int]]:
    """A person approves a pending recommendation and the steps it was computed behind (the page
    and the REST API alike); a step that no longer fits the latest snapshot expires instead, with
    the reason. Returns why nothing of its cluster can be migrated at all ("" when tried), and
    the migrations this call approved (a click that came second approved none)."""
    if refusal := not_migratable(migration.cluster):
        return refusal, []
    with transaction.atomic():
        approved = approve_steps(migration, user)
        decided(approved, approved + [migration.pk])
    return "", approved


def apply_all(cluster: Cluster, user) -> tuple[list[Migration], dict[int, str]]:
    """Apply all: every pending recommendation of a migratable cluster, plan by plan in plan
    order, each re-checked on the latest snapshot. Returns the migrations approved and, for each
    pending one that was not, why. The caller has checked `not_migratable`."""
    pending = list(cluster.migrations.filter(state="suggested").order_by("plan", "step").values_list("pk", flat=True))
    with transaction.atomic():
        approved = approve_all_steps(cluster, user)
        decided(approved, approved)
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
        changed = reject_step(migration, user, reason)
        decided([], changed)
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
        decided([], [pk] if marked else [])
    migration = Migration.objects.select_related("decided_by").get(pk=pk)
    return migration, "" if marked else f"migration {pk} is {migration.state}, not running"


def toggle_stop(cluster: Cluster, user, stop: bool, scope: str = "here") -> dict:
    """The emergency stop of one cluster set (automation paused, approved moves expire, running
    ones aborted) or lifted, in `scope`: "here" (the cluster's own) or "all" (Stop all's); what
    it did and the stops that hold after it."""
    done: dict = {}
    if not stop:
        changed = lift_emergency_stop(cluster, user, scope)
    else:
        with transaction.atomic():
            done = emergency_stop(cluster, user, scope)
            decided([], done["expired"])
        changed = done.pop("changed")
    if changed:
        events.stop_changed.send(Cluster, cluster_id=cluster.pk)
    cluster.refresh_from_db(fields=STOP_FIELDS)
    return {"stopped": cluster.stopped, "stop": cluster.stop(), **done}


def decided(approved: list[int], changed: list[int]) -> None:
    """Announce a decision: once it commits, what it approved starts and what it changed is pushed."""
    events.decided.send(Migration, approved=approved, changed=changed)


def approve_steps(migration: Migration, actor, automatic: bool = False, details: dict | None = None) -> list[int]:
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


def approve_all_steps(cluster, actor) -> list[int]:
    """Apply all: every pending recommendation of the cluster, plan by plan, in plan order."""
    approved = []
    for migration in cluster.migrations.filter(state="suggested").order_by("plan", "step"):
        migration.refresh_from_db()
        if migration.state == "suggested":
            approved += approve_steps(migration, actor)
    return approved


def reject_step(migration: Migration, actor, reason: str) -> list[int]:
    """Reject one step with its reason (the rejection memory bars the move); the steps
    computed behind it expire. Returns the migrations this call changed."""
    if not Migration.objects.transition(migration.pk, "suggested", "rejected", actor, decided_by=actor, reason=reason):
        return []
    return [migration.pk, *expiry.behind_rejected(migration)]


# -- the emergency stop ---------------------------------------------------------------------------


STOP_FIELDS = ["stop_here_at", "stop_here_by", "stop_all_at", "stop_all_by"]


def emergency_stop(cluster: Cluster, actor, scope: str = "here") -> dict:
    """Set the stop of `scope` ("here" or "all"); what it did: the approved migrations expired
    (toggle_stop announces them), the running ones asked to abort. Setting a stop that already
    holds does nothing; setting one while the other holds is audited all the same (each is
    lifted on its own)."""
    with transaction.atomic():
        if not _stop_set(cluster, actor, scope):
            return {"changed": False, "expired": [], "aborted": [], "abort_errors": []}
        expired = expiry.stopped(cluster, actor)
    aborted, errors = abort_running(cluster)
    details = {"expired": expired, "aborted": aborted, "abort_errors": errors}
    AuditEvent.objects.create(
        actor=actor, action="emergency-stop", cluster=cluster, details={"scope": scope, **details}
    )
    return {"changed": True, **details}


def _stop_set(cluster: Cluster, actor, scope: str) -> bool:
    unset = {f"stop_{scope}_at": None}
    setting = {f"stop_{scope}_at": timezone.now(), f"stop_{scope}_by": actor.get_username() if actor else ""}
    return Cluster.objects.filter(pk=cluster.pk, **unset).update(**setting) == 1


def lift_emergency_stop(cluster: Cluster, actor, scope: str = "here") -> bool:
    """Undo the stop of `scope`: automation resumes from the next round unless the other holds."""
    with transaction.atomic():
        held = Cluster.objects.filter(pk=cluster.pk, **{f"stop_{scope}_at__isnull": False})
        done = held.update(**{f"stop_{scope}_at": None, f"stop_{scope}_by": ""}) == 1
        if done:
            AuditEvent.objects.create(
                actor=actor, action="emergency-stop-lifted", cluster=cluster, details={"scope": scope}
            )
    return done


def abort_running(cluster: Cluster) -> tuple[list[int], list[str]]:
    """Ask the source to abort each running migration's tasks; followers then see them fail."""
    aborted: list[int] = []
    errors: list[str] = []
    running = list(cluster.migrations.filter(state="running").exclude(task_ids=[]))
    if not running:
        return aborted, errors
    try:
        with Cluster.objects.opened_source(cluster.pk) as (_, source):
            for migration in running:
                try:
                    for task_id in migration.task_ids:
                        source.abort(task_id, time.time())
                    aborted.append(migration.pk)
                except (SourceError, CrsError) as exc:
                    errors.append(f"#{migration.pk}: {exc}")
    except (SourceError, CrsError) as exc:
        errors.append(str(exc))
    if errors:
        log.warning("cluster %s: emergency stop could not abort everything: %s", cluster.pk, errors)
    return aborted, errors
