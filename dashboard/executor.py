"""The migration executor: admit an approved migration, start it at the adapter, follow it, settle it.

What runs a migration, apart from when it runs: the Celery tasks (tasks.py) call these and queue
what they return (the next poll, the next approved steps), so nothing here queues a task. Each
step is one conditional state change (MigrationManager.transition), so two workers or a
redelivered message never start a migration twice.
"""

import logging
import time
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

import crs.claims
import crs.locks
import crs.starts
from crs.errors import CrsError
from crs.sources.base import SourceError, TaskStatus

from . import automation, expiry, plans
from .live import sender as live
from .models import Cluster, Migration
from .models.migration import UNFOLLOWED, silent

log = logging.getLogger(__name__)
FOLLOW_SECONDS = 1.0  # how often a running migration's progress is polled and pushed
# An approved migration not started after this long lost its message; rounds queue it again.
STALLED_APPROVAL = timedelta(seconds=30)


def admit(migration_id: int) -> str:
    """approved → running if a slot is free and a fresh snapshot still supports the move;
    approved → expired (with the reason) if not. Returns the state it is left in.

    Under the cluster's lock (Cluster.objects.opened_source), so two workers never both take the last slot.
    Approved steps start in plan order, at most `max_concurrent_migrations` at once and
    `max_migrations_per_node` into or out of one node. The fresh snapshot counts the claims
    it must leave room for (crs.starts.ahead), so two moves never together overfill a node: a
    target that no longer fits gives way to the step's next alternative target; with none, a
    step that only another move's claim keeps off its target, or that goes into room a move
    ahead of it frees, waits, saying whose move; any other step expires. A step whose guest
    is locked (a backup, a snapshot: crs.locks) waits until the lock is gone.
    """
    try:
        with Cluster.objects.opened_source(Migration.objects.get(pk=migration_id).cluster_id) as (cluster, source):
            migration = Migration.objects.select_related("cluster__policy").get(pk=migration_id)
            if migration.state != "approved":
                return migration.state
            if cluster.stopped:
                expiry.stopped(cluster, None)
                return "expired"
            if reason := held(cluster, migration):
                plans.hold(cluster, migration, reason)
                return "approved"  # queued again by each round until the window opens, or on resume
            step = as_step(migration)
            if not crs.starts.turn(step, _queue(cluster, migration)):
                return "approved"  # queued again when a running one starts or finishes
            fresh = cluster.under_policy(source.collect(time.time()))
            holding = cluster.migrations.filter(state__in=crs.claims.HOLDING).exclude(pk=migration.pk)
            ahead = crs.starts.ahead(step, [as_step(m) for m in holding])
            start = crs.starts.decide(step, fresh, ahead, cluster.guards())
            if start.verdict == "wait":  # a lock, or another move's claim or room
                plans.hold(cluster, migration, start.reason)
                return "approved"  # queued again when a migration finishes, and by every round
            # Only admit() moves an approved migration on, under this lock: the transitions succeed.
            if start.target != migration.target:  # its alternative target
                Migration.objects.filter(pk=migration_id).update(target=start.target)
            if start.verdict == "expire":
                expiry.stale_at_start(migration_id, start.reason)
                return "expired"
            Migration.objects.transition(migration_id, "approved", "running", None, {"target": start.target}, reason="")
            return "running"
    except (SourceError, CrsError) as exc:
        expiry.unverifiable(migration_id, exc)
        return "expired"
    finally:
        live.push_migration(migration_id)


def held(cluster: Cluster, migration: Migration) -> str:
    """Why the approved `migration` must wait though a slot may be free ("" = it need not): a closed
    change window (automation.start_held) or the rolling maintenance draining its node, paused or
    cancelled (RollingMaintenance.holds; set_state takes the same lock)."""
    rolling = cluster.rollings.first()
    return automation.start_held(cluster, migration) or (rolling.holds(migration) if rolling else "")


def as_step(m: Migration) -> crs.starts.Step:
    """A migration as the engine's start decision reads it; approved at its decision (a row
    stored approved has no time: first), its id after it."""
    approved_at = (m.decided_at.timestamp() if m.decided_at else 0.0, m.pk)
    return crs.starts.Step(f"migration {m.pk}", m.as_move(), m.kind, m.state, approved_at, tuple(m.alternatives))


def _queue(cluster: Cluster, migration: Migration) -> crs.starts.Queue:
    """What the cluster runs and queues beside `migration`, for its turn (crs.starts.turn)."""
    approved = cluster.migrations.filter(state="approved").exclude(pk=migration.pk)
    earlier = migration.plan is not None and approved.filter(plan=migration.plan, step__lt=migration.step).exists()
    running = cluster.migrations.filter(state="running").values_list("source", "target")
    return crs.starts.Queue(
        frozenset(approved.values_list("kind", flat=True).distinct()),
        earlier,
        tuple(running),
        cluster.policy.max_concurrent_migrations,
        cluster.policy.max_migrations_per_node,
    )


def start(migration_id: int) -> str:
    """Ask the adapter to migrate; its task ids are stored in the transaction that stores the
    adapter's state, so a worker killed here leaves a running migration with no task: failed
    by the next look (settle_unstarted), never started again.

    Returns "running" if it started (follow it), "failed" if the adapter refused and this call
    failed it, "approved" if Proxmox refused its first guest for a lock (locked_out), "" if
    someone who thought this worker dead settled it first."""
    try:
        with Cluster.objects.opened_source(Migration.objects.get(pk=migration_id).cluster_id) as (_, source):
            migration = Migration.objects.get(pk=migration_id)
            if migration.state != "running" or migration.task_ids:
                return ""  # settled by someone who thought this worker dead
            now = time.time()
            task_ids: list[str] = []
            for sid in migration.guests:
                try:
                    task_ids.append(source.migrate(sid, migration.target, now))
                except SourceError as exc:
                    if task_ids or not (lock := crs.locks.refused(str(exc))):
                        raise
                    return locked_out(migration, sid, lock)
            Migration.objects.filter(pk=migration_id).update(task_ids=task_ids)
    except (SourceError, CrsError) as exc:
        return finish(migration_id, "failed", reason=str(exc))
    return "running"


def locked_out(migration: Migration, sid: str, lock: str) -> str:
    """running → approved: Proxmox refused to migrate `sid` for its lock (taken after the fresh
    snapshot admit() read, as a backup takes guest after guest), before any of the move's guests
    left. The move waits for the lock as admit() makes it wait, in its place among the approved
    ones. Returns "approved" if this call made the change (its slot is free), else ""."""
    reason = f"waits: {sid} is locked: {lock} (Proxmox refused its migration)"
    with transaction.atomic():
        if not Migration.objects.transition(
            migration.pk,
            "running",
            "approved",
            None,
            reason=reason,
            decided_at=migration.decided_at,
            started_at=None,
            task_ids=[],
            progress=0.0,
        ):
            return ""
        transaction.on_commit(lambda: live.push_migration(migration.pk))
    return "approved"


def settle_unstarted(migration_id: int) -> str:
    """A running migration without a task: its starter stopped. Holding the cluster lock the
    starter held while starting proves it is not half-way; fail it, with the reason. Returns
    "failed" if this call failed it."""
    with Cluster.objects.opened_source(Migration.objects.get(pk=migration_id).cluster_id):
        if Migration.objects.filter(pk=migration_id, state="running", task_ids=[]).exists():
            return finish(
                migration_id,
                "failed",
                reason="the worker stopped while starting it; no migration task "
                "was recorded, so it was not started again",
            )
    return ""


def poll(migration: Migration) -> str:
    """Ask the adapter how a running migration's tasks are doing: record and push its progress,
    or end it. Returns "running" while it goes on, else the state this call left it in ("" if
    another decision came first): "approved" when Proxmox refused it for a lock (locked_out)."""
    try:
        with Cluster.objects.opened_source(migration.cluster_id) as (_, source):
            now = time.time()
            statuses = [source.task_status(task_id, now) for task_id in migration.task_ids]
    except (SourceError, CrsError) as exc:
        return finish(migration.pk, "failed", reason=str(exc))
    refusals = [(sid, lock) for sid, s in zip(migration.guests, statuses, strict=True) if (lock := _lock_refusal(s))]
    if refusals and len(refusals) == len(statuses):  # a container's task ends "CT is locked (backup)"
        return locked_out(migration, *refusals[0])
    if failed := [s for s in statuses if s.state == "failed"]:
        return finish(migration.pk, "failed", reason="; ".join(s.reason for s in failed))
    if all(s.state == "done" for s in statuses):
        return finish(migration.pk, "done", progress=1.0)
    progress = sum(s.progress for s in statuses) / len(statuses)
    Migration.objects.filter(pk=migration.pk, state="running").update(progress=progress)
    live.push_migration(migration.pk)
    return "running"


def _lock_refusal(status: TaskStatus) -> str:
    """The lock a failed task names ("backup"), or "" for a task that ran or failed otherwise."""
    return crs.locks.refused(status.reason) if status.state == "failed" else ""


def finish(migration_id: int, state: str, **fields) -> str:
    """running → done or failed, pushed once committed. Returns `state` if this call made the
    change (its slot is free: the caller queues the cluster's waiting steps), else ""."""
    with transaction.atomic():
        if not Migration.objects.transition(migration_id, "running", state, None, details=fields, **fields):
            return ""
        transaction.on_commit(lambda: live.push_migration(migration_id))
    return state


def waiting(cluster_id: int) -> list[int]:
    """The cluster's approved migrations, in plan order: each starts if its slot is free."""
    steps = Migration.objects.filter(cluster_id=cluster_id, state="approved").order_by("plan", "step", "decided_at")
    return list(steps.values_list("pk", flat=True))


def stalled(cluster_id: int | None = None, after: timedelta = STALLED_APPROVAL) -> list[int]:
    """Approved migrations nobody started for `after` (of one cluster, or all): their message
    was lost (broker down at approval) or they wait for a slot."""
    found = Migration.objects.filter(state="approved", decided_at__lte=timezone.now() - after)
    if cluster_id is not None:
        found = found.filter(cluster_id=cluster_id)
    return list(found.values_list("pk", flat=True))


def lease_follow(migration_id: int) -> bool:
    """True if this caller polls the running migration now: nobody did in the last half
    FOLLOW_SECONDS. One conditional UPDATE, so of two followers of one migration one stops."""
    now = timezone.now()
    recently = Q(followed_at__gt=now - timedelta(seconds=FOLLOW_SECONDS / 2))
    return Migration.objects.filter(pk=migration_id, state="running").exclude(recently).update(followed_at=now) == 1


def unfollowed(cluster_id: int | None = None, after: timedelta = UNFOLLOWED) -> list[int]:
    """The running migrations nobody polled for `after` (of one cluster, or all), to be followed
    again: the adapter is asked for its task's state, so one that ended during an outage is settled.

    Each is stamped first (conditionally), so two rounds never return it both."""
    now = timezone.now()
    stale = silent(now, after)
    running = Migration.objects.filter(stale, state="running")
    if cluster_id is not None:
        running = running.filter(cluster_id=cluster_id)
    found = []
    for pk in running.values_list("pk", flat=True):
        # stamped back by one poll interval: the follower queued for it may poll it at once
        if Migration.objects.filter(stale, pk=pk).update(followed_at=now - timedelta(seconds=FOLLOW_SECONDS)):
            log.warning("migration %s: not followed for %s s; following it again", pk, after.seconds)
            found.append(pk)
    return found
