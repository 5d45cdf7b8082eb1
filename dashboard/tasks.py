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
from datetime import UTC, datetime, timedelta
from functools import partial

from celery import Task, shared_task
from django.core.cache import cache
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction
from django.db.models import F
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
from .models.cluster import holder_gone, lease_holder

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
# A collect's running mark (tasks.collecting) lapses after this if its worker dies: longer than
# a collect of a cluster that answers slowly (its calls time out), short enough that a killed
# worker's cluster is collected again within a minute.
COLLECT_LEASE = 60


@shared_task(ignore_result=True)
def collect(cluster_id: int, due: bool = False) -> None:
    """Take a snapshot of the cluster, then queue its round (beat's task for Proxmox clusters,
    on their own queue, `due`; a collect asked for now, of any cluster)."""
    if (collected := collected_now(cluster_id, due)) is not None:
        queue_round(collected[0])


@shared_task(ignore_result=True)
def collect_and_round(cluster_id: int, due: bool = False) -> None:
    """Take a snapshot of the cluster and run its round on it in the same task (beat's task for
    simulated and imported clusters: their collect waits on no network). The round takes the
    snapshot as collected, not read back and parsed from the row it was stored in."""
    if (collected := collected_now(cluster_id, due)) is not None:
        run_round(cluster_id, collected[1])


def collected_now(cluster_id: int, due: bool = False) -> tuple[Cluster, crs.model.Snapshot] | None:
    """Collect the cluster; the cluster and its new snapshot once stored, else None. Bad data
    is refused, never stored. A collect beat found `due` while the last one still runs is
    skipped and counted (collects_skipped); one asked for now (a node into maintenance) runs,
    since the running one may have read the cluster before the change.

    No transaction is open and no row locked while the adapter reads the cluster (a Proxmox
    collect waits on the network): what it read is stored afterwards in one short transaction,
    with the admin's edits as they are then, unless a collect that began later stored first
    (Cluster.objects.store_collected)."""
    if due and not collecting(cluster_id, True):
        Cluster.objects.filter(pk=cluster_id).update(collects_skipped=F("collects_skipped") + 1)
        log.info("cluster %s: collect skipped: the last one is still running", cluster_id)
        return None
    try:
        cluster, source = Cluster.objects.opened_for_collect(cluster_id)
        if cluster.archived:
            return None  # archived after beat queued this
        if cluster.is_proxmox:
            lend_connection()
        started = time.time()
        read = source.collect(started)
        recovered = bool(cluster.source_error)
        collected_at = timezone.now()
        # Only the Proxmox adapter reads Proxmox's own balancer (crs.coexistence); others have none.
        peer = getattr(source, "proxmox_balancer", None)
        with transaction.atomic():
            # The admin's edits (standby list, rules, opt-outs) are applied under the row lock
            # they are made under (ha.refresh_snapshot): one made while the adapter read the
            # cluster is in what is stored, not overwritten by a snapshot built before it.
            Cluster.objects.select_for_update().filter(pk=cluster_id).values_list("pk").get()
            snapshot = ha.applied(cluster, read)
            if not Cluster.objects.store_collected(
                cluster,
                source,
                datetime.fromtimestamp(started, UTC),
                snapshot=crs.snapshot.to_dict(snapshot),
                collected_at=collected_at,
                source_error="",
                proxmox_balancer=peer.to_dict() if peer else None,
            ):
                return None  # a later collect stored its snapshot first: its round runs on that
            cluster.collected_at = collected_at
            history.record_samples(cluster, snapshot, collected_at)
    except Cluster.DoesNotExist:
        return None  # deleted since beat read its schedule
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
        return None
    finally:
        if due:
            collecting(cluster_id, False)
    if recovered:
        live.push(cluster_id, live.source_payload("", None))
    return cluster, snapshot


def lend_connection() -> None:
    """Give this thread's database connection back to the pool while the adapter waits on the
    network: `make worker-proxmox` runs more threads than its pool has connections
    (CRS_DB_POOL_SIZE), and a thread waiting on a Proxmox cluster needs none. The store takes
    one again (from the pool: no new connection). Not inside a transaction, nor without a pool."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


def collecting(cluster_id: int, start: bool) -> bool:
    """Mark the cluster's collect as running (start: True if none was) or ended. A cache key
    (Redis in the distributed mode: one mark for every worker) naming its holder as the round
    lease does: a worker killed mid-collect is seen gone by the workers on its host, which take
    the mark over at once (the fault soak saw a cluster without rounds for 66 s); one on another
    host lapses after COLLECT_LEASE. With the cache away the collect runs: a second one at once
    is dropped at its store (store_collected), never stored twice."""
    key = f"crs-collecting-{cluster_id}"
    try:
        if start:
            holder = lease_holder()
            if cache.add(key, holder, COLLECT_LEASE):
                return True
            held_by = cache.get(key)
            if not isinstance(held_by, str) or not holder_gone(held_by):
                return False
            log.warning("cluster %s: collect mark taken over from %s, gone mid-collect (killed?)", cluster_id, held_by)
            cache.set(key, holder, COLLECT_LEASE)
            return True
        cache.delete(key)
    except (OSError, RedisError) as exc:
        log.warning("cluster %s: collect mark not %s: %s", cluster_id, "set" if start else "cleared", exc)
    return True


def collect_soon(cluster_id: int) -> None:
    """Queue a collect of the cluster now, on its collect queue (a Proxmox cluster's on the
    threads of `make worker-proxmox`, where waiting on the network holds no process)."""
    kind = Cluster.objects.filter(pk=cluster_id).values_list("source_kind", flat=True).first()
    if kind is not None:
        collect.apply_async((cluster_id,), queue=Cluster(source_kind=kind).collect_queue)


def queue_round(cluster: Cluster) -> None:
    """Queue the cluster's round unless one is queued already. It expires after one round
    interval (the next collect queues a fresher one); a what-if cluster's goes to its own
    queue, so a heavy imported snapshot cannot delay the live clusters' rounds."""
    interval = timedelta(seconds=cluster.policy.round_interval_s)
    if Cluster.objects.queue_round(cluster.pk, interval):
        balancing_round.apply_async((cluster.pk,), queue=cluster.task_queue, expires=interval.total_seconds())


@shared_task(ignore_result=True)
def balancing_round(cluster_id: int) -> None:
    """Runs after each collect that queued it (tasks.collect). It decides nothing itself; crs.round does."""
    Cluster.objects.filter(pk=cluster_id).update(round_queued_until=None)  # the next collect may queue one
    run_round(cluster_id)


def run_round(cluster_id: int, collected: crs.model.Snapshot | None = None) -> None:
    """The cluster's round on its latest snapshot: `collected`, as this task's collect just
    stored it, or else the stored one. One at a time per cluster (its round lease)."""
    try:
        leased = Cluster.objects.lease_round(cluster_id)
    except DATABASE_DOWN:
        release_round(cluster_id)  # its UPDATE may have committed and only the answer been lost
        raise
    if not leased:
        return  # this cluster's round is already running on another worker
    try:
        clusters = Cluster.objects.select_related("policy")
        cluster = (clusters.defer("snapshot") if collected else clusters).get(pk=cluster_id)
        at, last = cluster.collected_at, cluster.last_round_at
        if (collected is None and cluster.snapshot is None) or (at and last and at <= last):
            return  # no snapshot yet, or a redelivered message: this snapshot has had its round
        started = time.monotonic()
        snapshot = cluster.under_policy(collected) if collected else cluster.latest_snapshot()
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
    power.advance(cluster_id)  # and a node emptied for a power-down is shut down or waits to be


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
    transaction.on_commit(partial(collect_soon, cluster_id), robust=True)


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


@receiver(events.stop_changed)
def push_stop(sender, cluster_id: int, **kwargs) -> None:
    """An emergency stop set or lifted: every page open on the cluster says so now, not at its next load."""

    def pushed() -> None:
        cluster = Cluster.objects.get(pk=cluster_id)
        live.push(cluster_id, live.stop_payload(cluster))

    transaction.on_commit(pushed, robust=True)


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
        collect_soon(cluster_id)


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
