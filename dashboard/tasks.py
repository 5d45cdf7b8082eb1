"""Celery tasks: thin shells that load, call the engine or the adapter, persist, then push.

Beat runs `collect` per cluster (a PeriodicTask row per cluster, see signals.py);
`collect` queues `balancing_round`, which queues `n1_refresh` and `capacity_counts` beside
itself when they are due; an approval queues `execute`, which starts the
migration and hands over to `follow` until the adapter reports it done or failed (both call
the migration executor, executor.py, and queue what it returns). What the domain and the
pages announce (events.py: a decision, a change a collect must see) is received here and
queued once it commits, so the domain never imports the tasks.
"""

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from functools import partial

from celery import Task, shared_task
from django.core.cache import cache
from django.db import InterfaceError, OperationalError, close_old_connections, transaction
from django.dispatch import receiver
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuError
from redis.exceptions import RedisError

import crs.model
import crs.snapshot
from crs.errors import CrsError
from crs.sources.base import SourceError

from . import capacity, events, executor, ha, history, n1, notify, outcomes, overview, power, rolling, rounds, whatif
from .live import sender as live
from .models import Cluster, Migration

log = logging.getLogger(__name__)
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
# The overview pages get one push per this many seconds however many rounds end meanwhile.
OVERVIEW_WINDOW = 2
OVERVIEW_KEY = "crs-overview-window"


@shared_task(ignore_result=True)
def collect(cluster_id: int) -> None:
    """Take a snapshot of the cluster, then queue its round. Bad data is refused, never stored."""
    try:
        with Cluster.objects.opened_source(cluster_id) as (cluster, source):
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
        overview_changed()
        return
    if recovered:
        live.push(cluster_id, live.source_payload("", None))
    queue_round(cluster)


def queue_round(cluster: Cluster) -> None:
    """Queue the cluster's round unless one is queued already. It expires after one round
    interval (the next collect queues a fresher one); a what-if cluster's goes to its own
    queue, so a heavy imported snapshot cannot delay the live clusters' rounds."""
    interval = timedelta(seconds=cluster.policy.round_interval_s)
    if Cluster.objects.queue_round(cluster.pk, interval):
        balancing_round.apply_async((cluster.pk,), queue=cluster.task_queue, expires=interval.total_seconds())


@shared_task(ignore_result=True)
def balancing_round(cluster_id: int) -> None:
    """Runs after each collect. It decides nothing itself; crs.round does."""
    Cluster.objects.filter(pk=cluster_id).update(round_queued_until=None)  # the next collect may queue one
    try:
        leased = Cluster.objects.lease_round(cluster_id)
    except DATABASE_DOWN:
        release_round(cluster_id)  # its UPDATE may have committed and only the answer been lost
        raise
    if not leased:
        return  # this cluster's round is already running on another worker
    try:
        cluster = Cluster.objects.select_related("policy").get(pk=cluster_id)
        collected, last = cluster.collected_at, cluster.last_round_at
        if cluster.snapshot is None or (collected and last and collected <= last):
            return  # no snapshot yet, or a redelivered message: this snapshot has had its round
        started = time.monotonic()
        snapshot = cluster.latest_snapshot()
        assert snapshot is not None  # stored, checked just above
        recorded = rounds.run(cluster, snapshot, started)  # load, let the engine decide, apply
        transaction.on_commit(lambda: announce(cluster, recorded))
        if n1.due(cluster):  # the N+1 verdict, on its own cadence (n1.N1_EVERY)
            queue_beside(cluster, n1_refresh, "n1_queued_until", N1_LEASE)
        if capacity.missing_sizes(cluster):  # the capacity trend, once an hour
            queue_beside(cluster, capacity_counts, "capacity_queued_until", COUNT_LEASE)
        for pk in recorded.approved:  # robust: with the broker down, later rounds queue them again
            transaction.on_commit(partial(execute.delay, pk), robust=True)
    finally:
        release_round(cluster_id)
    requeue_stalled(cluster_id)
    refollow_unfollowed(cluster_id)
    for pk in outcomes.measure(cluster_id):  # this round may be the measurement a finished move waited for
        live.push_migration(pk)
    rolling_round(cluster_id)  # on this round's snapshot: a node drained or back takes its next step
    power_round(cluster_id)  # and a node emptied for a power-down is shut down or waits to be


def release_round(cluster_id: int) -> None:
    """Release this process's round lease, even when the database left mid-round: the release
    is tried again each second until it is back, at most until the lease would lapse by itself.
    A round cut by an outage used to leave the lease held by its living worker, so the cluster
    had no round for up to ROUND_LEASE after the database returned (the fault soak: 56.6 s
    without a round after a 20-s outage). The worker process waits meanwhile; nothing else it
    could run would reach the database either."""
    deadline = time.monotonic() + Cluster.objects.ROUND_LEASE.total_seconds()
    while True:
        try:
            Cluster.objects.release_round(cluster_id)
            return
        except DATABASE_DOWN:
            if time.monotonic() > deadline:
                raise
            close_old_connections()  # a connection the outage broke goes back to the pool, dropped
            time.sleep(1)


def queue_beside(cluster: Cluster, task: Task, lease_field: str, lease: timedelta) -> None:
    """Queue `task` (n1_refresh, capacity_counts) for the cluster once this round commits, unless
    one is queued or running: slow work runs beside the rounds, never holding one (or its lease)
    up. The task releases `lease_field` when done; a lost or failed one is queued again once
    `lease` lapses. Robust: with the broker down, a later round queues it again."""
    if Cluster.objects.lease(cluster.pk, lease_field, lease):
        queue = cluster.task_queue
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
    overview_changed()


def overview_changed() -> None:
    """A cluster's row on the overview changed: the first change of a window queues the push
    of every row OVERVIEW_WINDOW seconds later, the others ride along. The window is a cache
    key (Redis in the distributed mode, so one window for every worker; SET NX)."""
    try:
        if cache.add(OVERVIEW_KEY, True, OVERVIEW_WINDOW):
            push_overview.apply_async(countdown=OVERVIEW_WINDOW)
    except (OSError, RedisError, KombuError) as exc:  # Redis away: the pages catch up on reconnect
        log.warning("overview push not queued: %s", exc)


@shared_task(ignore_result=True)
def push_overview() -> None:
    """Every cluster's overview row, in one event to the overview pages."""
    live.push_overview(overview.rows())


@shared_task(ignore_result=True)
def execute(migration_id: int) -> None:
    """Start an approved migration: admit it (re-checked on a fresh snapshot), start it, follow it.

    Safe to deliver twice (acks_late after a killed worker, the stalled-approval sweep):
    only the call that moves it from approved to running starts it. A call that finds it
    running without a started task knows its starter died and marks it failed, so a
    migration is never started twice.
    """
    migration = Migration.objects.filter(pk=migration_id).first()
    if migration is None:
        return
    if migration.state == "approved" and executor.admit(migration_id) == "running":
        started = executor.start(migration_id)
        if started == "running":
            follow.apply_async((migration_id,), countdown=executor.FOLLOW_SECONDS)
            queue_waiting(migration.cluster_id)  # the next steps may run side by side with this one
        elif started:
            freed(migration.cluster_id)
    elif migration.state == "running" and not migration.task_ids:
        settle_unstarted(migration)


# -- what the domain and the faces announce (events.py): the work each calls for, once it commits --


@receiver(events.decided)
def after_decision(sender, approved: list[int], changed: list[int], **kwargs) -> None:
    """A person's decision: start what was approved (robust: with the broker down the approval
    stands, and the next round queues it again) and push what changed."""
    for pk in approved:
        transaction.on_commit(partial(execute.delay, pk), robust=True)
    for pk in dict.fromkeys(changed):
        transaction.on_commit(partial(live.push_migration, pk))


@receiver(events.collect_wanted)
def collect_now(sender, cluster_id: int, **kwargs) -> None:
    """A collect now: the round sees the change (a node into or out of maintenance) without waiting for beat."""
    transaction.on_commit(partial(collect.delay, cluster_id), robust=True)


@receiver(events.node_back)
def collect_after_node_back(sender, cluster_id: int, expired: list[int], **kwargs) -> None:
    """After "node is back": the migrations leaving expired pushed, and a collect now, so the
    round sees the node back and plans its failback without waiting for the next beat."""
    for pk in expired:
        transaction.on_commit(partial(live.push_migration, pk), robust=True)
    collect_now(sender, cluster_id)


@receiver(events.rolling_changed)
def rolling_next_steps(sender, cluster_id: int, **kwargs) -> None:
    """After any change to a rolling maintenance: it moves on now, and the approved moves are queued
    (a resume frees the moves of the evacuation it held) rather than waiting for the next round."""

    def next_steps() -> None:
        rolling_round.delay(cluster_id)
        queue_waiting(cluster_id)

    transaction.on_commit(next_steps, robust=True)


@receiver(events.whatif_created)
def whatif_created(sender, whatif_id: int, **kwargs) -> None:
    transaction.on_commit(partial(run_whatif.delay, whatif_id))


def queue_waiting(cluster_id: int) -> None:
    """Queue every approved migration of the cluster, in plan order; each starts if its slot is free."""
    for pk in executor.waiting(cluster_id):
        execute.delay(pk)


def freed(cluster_id: int) -> None:
    """A migration of the cluster ended: once that commits, its slot starts the next approved one."""
    transaction.on_commit(lambda: queue_waiting(cluster_id))


def settle_unstarted(migration: Migration) -> None:
    """A running migration without a task (executor.settle_unstarted): failed, its slot freed."""
    if executor.settle_unstarted(migration.pk):
        freed(migration.cluster_id)


@shared_task(
    ignore_result=True, autoretry_for=DATABASE_DOWN, default_retry_delay=DATABASE_RETRY_SECONDS, max_retries=None
)
def follow(migration_id: int) -> None:
    """Poll a running migration once; push its progress; come back until it ends."""
    migration = Migration.objects.get(pk=migration_id)
    if migration.state != "running":
        return
    if not migration.task_ids:
        settle_unstarted(migration)
        return
    if not executor.lease_follow(migration_id):
        return  # another follower (one queued again by reconcile) polled it just now: one chain goes on
    state = executor.poll(migration)
    if state == "running":
        follow.apply_async((migration_id,), countdown=executor.FOLLOW_SECONDS)
    elif state:
        freed(migration.cluster_id)


def requeue_stalled(cluster_id: int | None = None, after: timedelta = executor.STALLED_APPROVAL) -> None:
    """Queue again the approved migrations nobody started (executor.stalled), every round;
    execute is safe to repeat."""
    for pk in executor.stalled(cluster_id, after):
        execute.delay(pk)


def refollow_unfollowed(cluster_id: int | None = None, after: timedelta = executor.UNFOLLOWED) -> None:
    """Follow again the running migrations nobody polled for `after` (executor.unfollowed)."""
    for pk in executor.unfollowed(cluster_id, after):
        follow.delay(pk)


@shared_task(ignore_result=True)
def reconcile(restarted: bool = False) -> None:
    """What an outage or a killed worker left unfollowed or unstarted, in every cluster: run on
    worker start (celery.py). `restarted`: the broker itself lost every message (runembedded's
    in-process broker keeps none across a restart), so nothing is waited for: every approved
    migration is queued and every running one followed at once."""
    refollow_unfollowed(after=timedelta(0) if restarted else executor.UNFOLLOWED)
    requeue_stalled(after=timedelta(0) if restarted else executor.STALLED_APPROVAL)


def finish(migration_id: int, state: str, **fields) -> None:
    """running → done or failed (executor.finish); a freed slot starts the next approved migration of the cluster."""
    if executor.finish(migration_id, state, **fields):
        freed(Migration.objects.filter(pk=migration_id).values_list("cluster_id", flat=True).get())


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
    queued by a round that found it due (n1.N1_EVERY): about a second at 1000 nodes, so it
    runs beside the rounds and keeps each under one. Safe to run twice: a fresh verdict is kept."""
    beside_round(cluster_id, "n1_queued_until", _refreshed_and_pushed)


def _refreshed_and_pushed(cluster: Cluster, snapshot: crs.model.Snapshot) -> None:
    if verdict := n1.refresh(cluster, snapshot):
        live.push(cluster.pk, verdict)


@shared_task(ignore_result=True)
def power_round(cluster_id: int) -> None:
    """Move the cluster's power-downs on (power.advance; safe to run twice at once)."""
    power.advance(cluster_id)
