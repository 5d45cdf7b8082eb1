"""A real Celery worker killed with SIGKILL in the middle of a migration (while starting it,
or while following it): the migration is carried to its end by the next worker, and never
started twice.

"Started" is observable: the simulator numbers every migration task it starts
(`next_task` in the cluster's stored adapter state), so two starts would show as two.
"""

import os
import signal
import time

import pytest
import redis
from celery import Celery
from conftest import FAST_SIMULATOR, service_or_skip, shared_database_url, single_worker, wait_until
from django.db import connection, transaction

from dashboard.models import AuditEvent, Cluster, Migration


def state(pk: int) -> str:
    return Migration.objects.values_list("state", flat=True).get(pk=pk)


def tasks_started(cluster_id: int) -> int:
    return Cluster.objects.get(pk=cluster_id).source_state["next_task"] - 1


VISIBILITY = 1.0  # seconds: single_worker's CRS_TASK_VISIBILITY_TIMEOUT


def past_the_visibility_timeout(redis_url: str) -> None:
    """Until every message a killed worker held is past the visibility timeout, by the time it
    was delivered (kombu's unacked index on the broker): the next worker's start then takes them
    back. A wait on that condition, not a guess on the clock."""
    broker = redis.Redis.from_url(redis_url)

    def past():
        """the killed worker's messages are past the visibility timeout"""
        newest = broker.zrange("unacked_index", -1, -1, withscores=True)
        return not newest or newest[0][1] + VISIBILITY < time.time()

    wait_until(past, 10, 0.05)
    broker.close()


def finished_by_a_new_worker(migration_id: int, database_url: str, redis_url: str) -> str:
    """The state a migration ends in once a new worker has taken back the killed one's messages."""
    past_the_visibility_timeout(redis_url)
    second = single_worker(database_url, redis_url, "worker-killed-second")
    try:
        return wait_until(lambda: state(migration_id) if state(migration_id) in ("done", "failed") else "")
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(15)


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers
def test_worker_killed_during_execute_leaves_a_migration_that_is_resumed_once(suggested, redis_server):
    service_or_skip("CRS_TEST_DATABASE_URL")
    database_url = shared_database_url()
    sender = Celery(broker=redis_server.url, set_as_current=False)
    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    first = single_worker(database_url, redis_server.url, "worker-killed-first")
    try:
        with transaction.atomic():
            # Hold the cluster's lock, so the worker's execute stops inside (at the fresh re-check).
            Cluster.objects.select_for_update().get(pk=suggested.cluster_id)
            sender.send_task("dashboard.tasks.execute", args=[suggested.pk])

            def blocked():
                """the worker's execute waits for the cluster lock"""
                with connection.cursor() as cursor:
                    cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                    return cursor.fetchone()[0] > 0

            wait_until(blocked)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
        assert state(suggested.pk) == "approved"  # the kill rolled back the worker's open transaction
        assert tasks_started(suggested.cluster_id) == 0
        assert finished_by_a_new_worker(suggested.pk, database_url, redis_server.url) == "done"
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert tasks_started(suggested.cluster_id) == 1
    assert AuditEvent.objects.filter(migration=suggested, action="running").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers
@pytest.mark.parametrize("next_poll_queued", [True, False], ids=["next-poll-queued", "killed-before-queuing"])
def test_worker_killed_while_following_a_migration_leaves_it_followed_to_its_end(
    suggested, redis_server, next_poll_queued
):
    service_or_skip("CRS_TEST_DATABASE_URL")
    database_url = shared_database_url()
    guest = next(g for g in suggested.cluster.snapshot["guests"] if g["sid"] == suggested.leader)
    # A migration of about 6 s: the kill lands between two polls, well before its end.
    Cluster.objects.filter(pk=suggested.cluster_id).update(
        source_config={**FAST_SIMULATOR, "migration_mib_s": guest["memory_bytes"] / 2**20 / 6}
    )
    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    first = single_worker(database_url, redis_server.url, "worker-killed-first")
    try:
        Celery(broker=redis_server.url, set_as_current=False).send_task("dashboard.tasks.execute", args=[suggested.pk])

        def followed():
            """the worker started the migration and polled its progress at least once"""
            return Migration.objects.filter(pk=suggested.pk, state="running", progress__gt=0).exists()

        wait_until(followed)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(10)
        assert Migration.objects.get(pk=suggested.pk).progress < 1.0  # killed mid-migration
        if not next_poll_queued:
            # The kill landed between a poll's commit and queuing the next (CI's load made that
            # window: a migration nobody followed again): the broker holds nothing of the chain.
            redis.Redis.from_url(redis_server.url).flushdb()
        assert finished_by_a_new_worker(suggested.pk, database_url, redis_server.url) in ("done", "failed")
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert tasks_started(suggested.cluster_id) == 1
    assert AuditEvent.objects.filter(migration=suggested, action="running").count() == 1
