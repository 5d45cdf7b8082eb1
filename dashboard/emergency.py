"""Emergency stop: one click (or API call) that halts a cluster's balancing, and a second that lifts it.

Stopping pauses automation (rounds still measure and recommend, nothing approves itself),
expires every approved migration not yet started, and asks the source to abort the running
ones where it can (the simulator stops them, Proxmox stops the task). Audited both ways.
"""

import logging
import time

from django.db import transaction

from crs.errors import CrsError
from crs.sources.base import SourceError

from . import expiry
from .models import AuditEvent, Cluster
from .sources import opened_source

log = logging.getLogger(__name__)


def stop(cluster: Cluster, actor) -> dict:
    """Stop the cluster; what it did: the approved migrations expired (the caller pushes them to the
    live pages), the running ones asked to abort."""
    with transaction.atomic():
        if Cluster.objects.filter(pk=cluster.pk, stopped=False).update(stopped=True) == 0:
            return {"expired": [], "aborted": [], "abort_errors": []}
        expired = expiry.stopped(cluster, actor)
    aborted, errors = abort_running(cluster)
    details = {"expired": expired, "aborted": aborted, "abort_errors": errors}
    AuditEvent.objects.create(actor=actor, action="emergency-stop", cluster=cluster, details=details)
    return details


def lift(cluster: Cluster, actor) -> bool:
    """Undo the stop: automation resumes from the next round."""
    with transaction.atomic():
        done = Cluster.objects.filter(pk=cluster.pk, stopped=True).update(stopped=False) == 1
        if done:
            AuditEvent.objects.create(actor=actor, action="emergency-stop-lifted", cluster=cluster)
    return done


def abort_running(cluster: Cluster) -> tuple[list[int], list[str]]:
    """Ask the source to abort each running migration's tasks; followers then see them fail."""
    aborted: list[int] = []
    errors: list[str] = []
    running = list(cluster.migrations.filter(state="running").exclude(task_ids=[]))
    if not running:
        return aborted, errors
    try:
        with opened_source(cluster.pk) as (_, source):
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
