"""Celery tasks: thin shells that load, call the engine or the adapter, persist, then push.

Beat runs `collect` per cluster (a PeriodicTask row per cluster, see signals.py);
`collect` queues `balancing_round`, which queues `n1_refresh` and `capacity_counts` beside
itself when they are due; an approval queues `execute`, which starts the
migration and hands over to `follow` until the adapter reports it done or failed.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from functools import partial

from celery import Task, shared_task
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Q
from django.utils import timezone

import crs.balancer
import crs.model
import crs.planner
import crs.precedence
import crs.snapshot
from crs.decision import RoundState
from crs.errors import CrsError
from crs.sources.base import SourceError

from . import capacity, expiry, ha, history, notify, outcomes, power, rolling, rounds, whatif, windows
from .live import sender as live
from .models import Cluster, Migration
from .sources import opened_source

log = logging.getLogger(__name__)
FOLLOW_SECONDS = 1.0  # how often a running migration's progress is polled and pushed
# An approved migration not started after this long lost its message; rounds queue it again.
STALLED_APPROVAL = timedelta(seconds=30)
# A running migration not polled for this long lost its follower (its message was dropped by a
# broker or database outage, or its worker was killed): rounds and a starting worker follow it again.
UNFOLLOWED = timedelta(seconds=10)
# A follower that cannot reach the database comes back this often until it can, instead of
# ending its chain: a migration that ends at the adapter during a database outage is recorded
# as soon as the database returns, without waiting for a round (whose lease the outage may hold).
DATABASE_DOWN = (OperationalError, InterfaceError)
DATABASE_RETRY_SECONDS = 5
# A capacity count queued or running keeps a second one from being queued for this long (a lost
# or failed one is queued again after it); the N+1 counts take seconds, minutes at 1000 nodes.
COUNT_LEASE = timedelta(minutes=15)
# The same for an N+1 refresh: about a second at 1000 nodes (6 s when every loss fails), so a
# lost one leaves the verdict a few minutes stale at most.
N1_LEASE = timedelta(minutes=3)
WHATIF_QUEUE = "whatif"  # read-only what-if clusters' collects and rounds (settings.CELERY_TASK_QUEUES)


@shared_task(ignore_result=True)
def collect(cluster_id: int) -> None:
    """Take a snapshot of the cluster, then queue its round. Bad data is refused, never stored."""
    try:
        with opened_source(cluster_id) as (cluster, source):
            if cluster.archived:
                return  # archived after beat queued this
            snapshot = ha.applied(cluster, source.collect(time.time()))
            recovered = bool(cluster.source_error)
            cluster.snapshot = crs.snapshot.to_dict(snapshot)
            cluster.collected_at = timezone.now()
            cluster.source_error = ""
            # Only the Proxmox adapter reads Proxmox's own balancer (crs.coexistence); others have none.
            peer = getattr(source, "proxmox_balancer", None)
            cluster.proxmox_balancer = peer.to_dict() if peer else None
            cluster.save(update_fields=["snapshot", "collected_at", "source_error", "proxmox_balancer"])
            history.record_samples(cluster, snapshot, cluster.collected_at)
    except Cluster.DoesNotExist:
        return  # deleted since beat read its schedule
    except (SourceError, CrsError) as exc:
        # The stored snapshot and history stay as they were; the page and /healthz say why.
        log.warning("cluster %s: collect refused: %s", cluster_id, exc)
        now = timezone.now()
        newly = Cluster.objects.filter(pk=cluster_id, source_error="").exists()
        Cluster.objects.filter(pk=cluster_id).update(source_error=str(exc), source_error_at=now)
        if newly:
            notify.source_unreachable(cluster_id, str(exc))
        live.push(cluster_id, live.source_payload(str(exc), now))
        return
    if recovered:
        live.push(cluster_id, live.source_payload("", None))
    queue_round(cluster)


def queue_round(cluster: Cluster) -> None:
    """Queue the cluster's round unless one is queued already. It expires after one round
    interval (the next collect queues a fresher one); a what-if cluster's goes to its own
    queue, so a heavy imported snapshot cannot delay the live clusters' rounds."""
    interval = timedelta(seconds=cluster.policy.round_interval)
    if Cluster.objects.queue_round(cluster.pk, interval):
        balancing_round.apply_async((cluster.pk,), queue=task_queue(cluster), expires=interval.total_seconds())


def task_queue(cluster: Cluster) -> str:
    """The Celery queue of a cluster's collects and rounds (the worker consumes both)."""
    return WHATIF_QUEUE if cluster.read_only else "celery"


@shared_task(ignore_result=True)
def balancing_round(cluster_id: int) -> None:
    """Runs after each collect. It decides nothing itself; crs.balancer does."""
    Cluster.objects.filter(pk=cluster_id).update(round_queued_until=None)  # the next collect may queue one
    if not Cluster.objects.claim_round(cluster_id):
        return  # this cluster's round is already running on another worker
    try:
        cluster = Cluster.objects.select_related("policy").get(pk=cluster_id)
        collected, last = cluster.collected_at, cluster.last_round_at
        if cluster.snapshot is None or (collected and last and collected <= last):
            return  # no snapshot yet, or a redelivered message: this snapshot has had its round
        started = time.monotonic()
        snapshot = cluster.latest_snapshot()
        assert snapshot is not None  # stored, checked just above
        result = crs.balancer.run_round(
            snapshot,
            RoundState(cluster.hold_count, **cluster.pressure_gate),
            proxmox_gate=False,
            guards=cluster.guards(),
        )
        recorded = rounds.record(cluster, snapshot, result, duration=time.monotonic() - started)
        transaction.on_commit(lambda: announce(cluster, recorded))
        if ha.n1_due(cluster):  # the N+1 verdict, on its own cadence (ha.N1_EVERY)
            queue_beside(cluster, n1_refresh, "n1_queued_until", N1_LEASE)
        if capacity.missing_sizes(cluster):  # the capacity trend, once an hour
            queue_beside(cluster, capacity_counts, "capacity_queued_until", COUNT_LEASE)
        for pk in recorded.approved:  # robust: with the broker down, later rounds queue them again
            transaction.on_commit(partial(execute.delay, pk), robust=True)
    finally:
        Cluster.objects.release_round(cluster_id)
    requeue_stalled(cluster_id)
    refollow_unfollowed(cluster_id)
    for pk in outcomes.measure(cluster_id):  # this round may be the measurement a finished move waited for
        live.push_migration(pk)
    rolling_round(cluster_id)  # on this round's snapshot: a node drained or back takes its next step
    power_round(cluster_id)  # and a node emptied for a power-down is shut down or waits to be


def queue_beside(cluster: Cluster, task: Task, lease_field: str, lease: timedelta) -> None:
    """Queue `task` (n1_refresh, capacity_counts) for the cluster once this round commits, unless
    one is queued or running: slow work runs beside the rounds, never holding one (or its lease)
    up. The task releases `lease_field` when done; a lost or failed one is queued again once
    `lease` lapses. Robust: with the broker down, a later round queues it again."""
    if Cluster.objects.lease(cluster.pk, lease_field, lease):
        queue = task_queue(cluster)
        transaction.on_commit(partial(task.apply_async, (cluster.pk,), queue=queue), robust=True)


def beside_round(cluster_id: int, lease_field: str, work: Callable[[Cluster, crs.model.Snapshot], object]) -> None:
    """Run `work(cluster, snapshot)` on the latest stored snapshot (nothing if the cluster or its
    snapshot is gone), then release the lease the round took in queue_beside."""
    try:
        cluster = Cluster.objects.select_related("policy").filter(pk=cluster_id).first()
        snapshot = cluster.latest_snapshot() if cluster is not None else None
        if cluster is not None and snapshot is not None:
            work(cluster, snapshot)
    finally:
        Cluster.objects.release(cluster_id, lease_field)


def announce(cluster: Cluster, recorded: rounds.Recorded) -> None:
    """Push a committed round and the migrations it changed to the cluster's pages."""
    live.push(cluster.pk, live.round_payload(recorded.round, cluster.policy.hold_duration))
    for pk in recorded.changed:
        live.push_migration(pk)


@shared_task(ignore_result=True)
def execute(migration_id: int) -> None:
    """Start an approved migration: claim it, re-check it on a fresh snapshot, start it, follow it.

    Safe to deliver twice (acks_late after a killed worker, the stalled-approval sweep):
    only the call that moves it from approved to running starts it. A call that finds it
    running without a started task knows its starter died and marks it failed, so a
    migration is never started twice.
    """
    migration = Migration.objects.filter(pk=migration_id).first()
    if migration is None:
        return
    if migration.state == "approved" and claim(migration_id) == "running":
        start(migration_id)
    elif migration.state == "running" and not migration.task_ids:
        settle_unstarted(migration_id)


def claim(migration_id: int) -> str:
    """approved → running if a slot is free and a fresh snapshot still supports the move;
    approved → expired (with the reason) if not. Returns the state it is left in.

    Under the cluster's lock (opened_source), so two workers never both take the last slot.
    Approved steps start in plan order, at most `max_concurrent_migrations` at once and
    `max_migrations_per_node` into or out of one node. The fresh snapshot counts every
    running migration's guests on their targets (its claim), so two concurrent moves never
    together overfill a node; a target that no longer fits gives way to the step's next
    alternative target, or the step expires.
    """
    try:
        with opened_source(Migration.objects.get(pk=migration_id).cluster_id) as (cluster, source):
            migration = Migration.objects.select_related("cluster__policy").get(pk=migration_id)
            if migration.state != "approved":
                return migration.state
            if cluster.stopped:
                expiry.stopped(cluster, None)
                return "expired"
            if windows.hold_start(cluster, migration):
                return "approved"  # outside the windows: queued again by each round until one opens
            if rolling.hold_start(cluster, migration):
                return "approved"  # a paused rolling maintenance's evacuation: queued again on resume
            if not slot_free(cluster, migration):
                return "approved"  # queued again when a running one starts or finishes
            snapshot = claimed(cluster, source.collect(time.time()))
            # Only claim() moves an approved migration on, under this lock: the transitions succeed.
            if migration.stale_reason(snapshot) and (target := alternative(migration, snapshot)):
                Migration.objects.filter(pk=migration_id).update(target=target)
                migration.target = target
            if expiry.stale_at_start(migration, snapshot):
                return "expired"
            Migration.objects.transition(
                migration_id, "approved", "running", None, {"target": migration.target}, reason=""
            )
            return "running"
    except (SourceError, CrsError) as exc:
        expiry.unverifiable(migration_id, exc)
        return "expired"
    finally:
        live.push_migration(migration_id)


def slot_free(cluster: Cluster, migration: Migration) -> bool:
    """Whether `migration` may start now: its kind's turn (approved moves of a higher kind go
    first, crs.precedence), its turn in plan order, a cluster slot, and room on both its nodes."""
    ahead = [k for k in crs.precedence.KINDS if crs.precedence.outranks(k, migration.kind)]
    if cluster.migrations.filter(state="approved", kind__in=ahead).exists():
        return False
    if (
        migration.plan is not None
        and cluster.migrations.filter(plan=migration.plan, state="approved", step__lt=migration.step).exists()
    ):
        return False
    running = list(cluster.migrations.filter(state="running").only("source", "target"))
    policy = cluster.policy
    if len(running) >= policy.max_concurrent_migrations:
        return False
    return all(
        sum(node in (m.source, m.target) for m in running) < policy.max_migrations_per_node
        for node in (migration.source, migration.target)
    )


def claimed(cluster: Cluster, snapshot: crs.model.Snapshot) -> crs.model.Snapshot:
    """The fresh snapshot under the cluster's policy, with every running migration's guests on its target."""
    snapshot = cluster.under_policy(snapshot)
    for m in cluster.migrations.filter(state="running"):
        on_source = all(g.node == m.source and not g.moving for g in snapshot.guests if g.sid in m.guests)
        if on_source and m.target in {n.name for n in snapshot.nodes}:
            snapshot = crs.balancer.apply_move(snapshot, m.as_move())
    return snapshot


def alternative(migration: Migration, snapshot: crs.model.Snapshot) -> str | None:
    """The step's first alternative target the fresh snapshot allows, if its own target no longer takes it."""
    if not crs.planner.target_refusal(snapshot, tuple(migration.guests), migration.target):
        return None  # stale for another reason: an alternative would not help
    for target in migration.alternatives:
        move = replace(migration.as_move(), target=target)
        if crs.balancer.stale_reason(snapshot, move, migration.cluster.guards()) is None:
            return target
    return None


def start(migration_id: int) -> None:
    """Ask the adapter to migrate; its task ids are stored in the transaction that stores the
    adapter's state, so a worker killed here leaves a running migration with no task: failed
    by the next look (settle_unstarted), never started again."""
    try:
        with opened_source(Migration.objects.get(pk=migration_id).cluster_id) as (_, source):
            migration = Migration.objects.get(pk=migration_id)
            if migration.state != "running" or migration.task_ids:
                return  # settled by someone who thought this worker dead
            now = time.time()
            task_ids = [source.migrate(sid, migration.target, now) for sid in migration.guests]
            Migration.objects.filter(pk=migration_id).update(task_ids=task_ids)
    except (SourceError, CrsError) as exc:
        finish(migration_id, "failed", reason=str(exc))
        return
    follow.apply_async((migration_id,), countdown=FOLLOW_SECONDS)
    queue_waiting(migration.cluster_id)  # the next steps may run side by side with this one


def queue_waiting(cluster_id: int) -> None:
    """Queue every approved migration of the cluster, in plan order; each starts if its slot is free."""
    waiting = Migration.objects.filter(cluster_id=cluster_id, state="approved").order_by("plan", "step", "decided_at")
    for pk in waiting.values_list("pk", flat=True):
        execute.delay(pk)


def settle_unstarted(migration_id: int) -> None:
    """A running migration without a task: its starter stopped. Holding the cluster lock the
    starter held while starting proves it is not half-way; fail it, with the reason."""
    with opened_source(Migration.objects.get(pk=migration_id).cluster_id):
        if Migration.objects.filter(pk=migration_id, state="running", task_ids=[]).exists():
            finish(
                migration_id,
                "failed",
                reason="the worker stopped while starting it; no migration task "
                "was recorded, so it was not started again",
            )


@shared_task(
    ignore_result=True, autoretry_for=DATABASE_DOWN, default_retry_delay=DATABASE_RETRY_SECONDS, max_retries=None
)
def follow(migration_id: int) -> None:
    """Poll a running migration once; push its progress; come back until it ends."""
    migration = Migration.objects.get(pk=migration_id)
    if migration.state != "running":
        return
    if not migration.task_ids:
        settle_unstarted(migration_id)
        return
    if not claim_follow(migration_id):
        return  # another follower (one queued again by reconcile) polled it just now: one chain goes on
    try:
        with opened_source(migration.cluster_id) as (_, source):
            now = time.time()
            statuses = [source.task_status(task_id, now) for task_id in migration.task_ids]
    except (SourceError, CrsError) as exc:
        finish(migration_id, "failed", reason=str(exc))
        return
    if failed := [s for s in statuses if s.state == "failed"]:
        finish(migration_id, "failed", reason="; ".join(s.reason for s in failed))
    elif all(s.state == "done" for s in statuses):
        finish(migration_id, "done", progress=1.0)
    else:
        progress = sum(s.progress for s in statuses) / len(statuses)
        Migration.objects.filter(pk=migration_id, state="running").update(progress=progress)
        live.push_migration(migration_id)
        follow.apply_async((migration_id,), countdown=FOLLOW_SECONDS)


def requeue_stalled(cluster_id: int | None = None, after: timedelta = STALLED_APPROVAL) -> None:
    """Approved migrations nobody started for `after` (of one cluster, or all): their message
    was lost (broker down at approval) or they wait for a slot. Queued again every round;
    execute is safe to repeat."""
    waiting = Migration.objects.filter(state="approved", decided_at__lte=timezone.now() - after)
    if cluster_id is not None:
        waiting = waiting.filter(cluster_id=cluster_id)
    for pk in waiting.values_list("pk", flat=True):
        execute.delay(pk)


def claim_follow(migration_id: int) -> bool:
    """True if this caller polls the running migration now: nobody did in the last half
    FOLLOW_SECONDS. One conditional UPDATE, so of two followers of one migration one stops."""
    now = timezone.now()
    recently = Q(followed_at__gt=now - timedelta(seconds=FOLLOW_SECONDS / 2))
    return Migration.objects.filter(pk=migration_id, state="running").exclude(recently).update(followed_at=now) == 1


def refollow_unfollowed(cluster_id: int | None = None, after: timedelta = UNFOLLOWED) -> None:
    """Follow again the running migrations nobody polled for `after` (of one cluster, or all):
    the adapter is asked for its task's state, so one that ended during an outage is settled.

    Stamping followed_at first (conditionally) keeps two rounds from queueing it twice."""
    now = timezone.now()
    stale = silent(now, after)
    running = Migration.objects.filter(stale, state="running")
    if cluster_id is not None:
        running = running.filter(cluster_id=cluster_id)
    for pk in running.values_list("pk", flat=True):
        # stamped back by one poll interval: the follower queued here may claim it at once
        if Migration.objects.filter(stale, pk=pk).update(followed_at=now - timedelta(seconds=FOLLOW_SECONDS)):
            log.warning("migration %s: not followed for %s s; following it again", pk, after.seconds)
            follow.delay(pk)


def silent(now, after: timedelta = UNFOLLOWED) -> Q:
    """A running migration's follower is silent: nobody polled it for `after` since it started.
    Reconcile follows such a one again; the page offers "Mark failed" only for them."""
    return Q(followed_at__lte=now - after) | Q(followed_at__isnull=True, started_at__lte=now - after)


def silent_from(migration: Migration):
    """When a running migration counts as silent unless polled again (None when not running)."""
    if migration.state != "running" or not (heard := migration.followed_at or migration.started_at):
        return None
    return heard + UNFOLLOWED


@shared_task(ignore_result=True)
def reconcile(restarted: bool = False) -> None:
    """What an outage or a killed worker left unfollowed or unstarted, in every cluster: run on
    worker start (celery.py). `restarted`: the broker itself lost every message (runembedded's
    in-process broker keeps none across a restart), so nothing is waited for: every approved
    migration is queued and every running one followed at once."""
    refollow_unfollowed(after=timedelta(0) if restarted else UNFOLLOWED)
    requeue_stalled(after=timedelta(0) if restarted else STALLED_APPROVAL)


def finish(migration_id: int, state: str, **fields) -> None:
    """running → done or failed; a freed slot starts the next approved migration of the cluster."""
    with transaction.atomic():
        if Migration.objects.transition(migration_id, "running", state, None, details=fields, **fields):
            transaction.on_commit(lambda: live.push_migration(migration_id))
            cluster_id = Migration.objects.filter(pk=migration_id).values_list("cluster_id", flat=True).get()
            transaction.on_commit(lambda: queue_waiting(cluster_id))


@shared_task(ignore_result=True)
def downsample_history() -> None:
    """Every minute (settings.CELERY_BEAT_SCHEDULE): fold aged history into coarser means."""
    history.downsample()


@shared_task(ignore_result=True)
def run_whatif(whatif_id: int) -> None:
    """Replay a what-if's settings over its cluster's stored history (whatif.py), with progress."""
    whatif.run(whatif_id)


@shared_task(ignore_result=True)
def rolling_round(cluster_id: int) -> None:
    """Move the cluster's rolling maintenance on (rolling.advance; safe to run twice at once). A
    node that entered maintenance gets a collect now: its evacuation is planned without waiting for beat."""
    if rolling.advance(cluster_id):
        collect.delay(cluster_id)


@shared_task(ignore_result=True)
def capacity_counts(cluster_id: int) -> None:
    """This hour's capacity figures (capacity.record_hourly), queued by a round that found them
    missing: the N+1-safe counts take seconds on a big cluster, so they run beside the rounds.
    Safe to run twice: one figure per size an hour. Released when done, so a size edited later
    counts at once."""
    beside_round(cluster_id, "capacity_queued_until", capacity.record_hourly)


@shared_task(ignore_result=True)
def n1_refresh(cluster_id: int) -> None:
    """The N+1 verdict on the latest stored snapshot, stored and pushed to the cluster's pages,
    queued by a round that found it due (ha.N1_EVERY): about a second at 1000 nodes, so it
    runs beside the rounds and keeps each under one. Safe to run twice: a fresh verdict is kept."""
    beside_round(cluster_id, "n1_queued_until", _refreshed_and_pushed)


def _refreshed_and_pushed(cluster: Cluster, snapshot: crs.model.Snapshot) -> None:
    if verdict := ha.refresh_n1(cluster, snapshot):
        live.push(cluster.pk, verdict)


@shared_task(ignore_result=True)
def power_round(cluster_id: int) -> None:
    """Move the cluster's power-downs on (power.advance; safe to run twice at once)."""
    power.advance(cluster_id)
