"""Celery tasks: thin shells that load, call the engine or the adapter, persist, then push.

Beat runs `collect` per cluster (a PeriodicTask row per cluster, see signals.py);
`collect` queues `balancing_round`; an approval queues `execute`, which starts the
migration and hands over to `follow` until the adapter reports it done or failed.
"""

import logging
import time

from celery import shared_task
from django.db import transaction
from django.utils import timezone

import crs.balancer
import crs.snapshot
from crs.decision import RoundState
from crs.errors import CrsError
from crs.sources.base import SourceError

from . import live, rounds
from .models import Cluster, Migration
from .sources import opened_source

log = logging.getLogger(__name__)
FOLLOW_SECONDS = 1.0  # how often a running migration's progress is polled and pushed


@shared_task(ignore_result=True)
def collect(cluster_id: int) -> None:
    """Take a snapshot of the cluster, then queue its round. Bad data is refused, never stored."""
    try:
        with opened_source(cluster_id) as (cluster, source):
            snapshot = source.collect(time.time())
            recovered = bool(cluster.source_error)
            cluster.snapshot = crs.snapshot.to_dict(snapshot)
            cluster.collected_at = timezone.now()
            cluster.source_error = ""
            cluster.save(update_fields=["snapshot", "collected_at", "source_error"])
    except Cluster.DoesNotExist:
        return  # deleted since beat read its schedule
    except (SourceError, CrsError) as exc:
        # The stored snapshot and history stay as they were; the page and /healthz say why.
        log.warning("cluster %s: collect refused: %s", cluster_id, exc)
        now = timezone.now()
        Cluster.objects.filter(pk=cluster_id).update(source_error=str(exc), source_error_at=now)
        live.push(cluster_id, live.source_payload(str(exc), now))
        return
    if recovered:
        live.push(cluster_id, live.source_payload("", None))
    balancing_round.delay(cluster_id)


@shared_task(ignore_result=True)
def balancing_round(cluster_id: int) -> None:
    """Runs after each collect. It decides nothing itself; crs.balancer does."""
    if not Cluster.objects.claim_round(cluster_id):
        return  # this cluster's round is already running on another worker
    try:
        cluster = Cluster.objects.select_related("policy").get(pk=cluster_id)
        if cluster.snapshot is None:
            return
        snapshot = crs.snapshot.parse(cluster.snapshot)
        result = crs.balancer.run_round(snapshot, cluster.policy.engine_settings(),
                                        RoundState(cluster.hold_count), proxmox_gate=False)
        rounds.record(cluster, snapshot, result)
    finally:
        Cluster.objects.release_round(cluster_id)


@shared_task(ignore_result=True)
def execute(migration_id: int) -> None:
    """Start an approved migration through the cluster's adapter."""
    if not Migration.objects.transition(migration_id, "approved", "running", None):
        return  # already started by another worker
    live.push_migration(migration_id)
    migration = Migration.objects.get(pk=migration_id)
    try:
        with opened_source(migration.cluster_id) as (cluster, source):
            if reason := migration.stale_reason(cluster.snapshot):
                raise SourceError(reason)
            now = time.time()
            task_ids = [source.migrate(sid, migration.target, now) for sid in migration.guests]
    except (SourceError, CrsError) as exc:
        finish(migration_id, "failed", reason=str(exc))
        return
    Migration.objects.filter(pk=migration_id).update(task_ids=task_ids)
    follow.apply_async((migration_id,), countdown=FOLLOW_SECONDS)


@shared_task(ignore_result=True)
def follow(migration_id: int) -> None:
    """Poll a running migration once; push its progress; come back until it ends."""
    migration = Migration.objects.get(pk=migration_id)
    if migration.state != "running":
        return
    if not migration.task_ids:
        finish(migration_id, "failed", reason="the worker stopped before the migration was started")
        return
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


def resume_unfinished() -> None:
    """Queue again what a restart dropped: the embedded broker keeps no messages across restarts,
    and an approved or running migration nobody follows would block its cluster's suggestions."""
    for pk in Migration.objects.filter(state="approved").values_list("pk", flat=True):
        execute.delay(pk)
    for pk in Migration.objects.filter(state="running").values_list("pk", flat=True):
        follow.delay(pk)


def finish(migration_id: int, state: str, **fields) -> None:
    with transaction.atomic():
        if Migration.objects.transition(migration_id, "running", state, None, details=fields, **fields):
            transaction.on_commit(lambda: live.push_migration(migration_id))

