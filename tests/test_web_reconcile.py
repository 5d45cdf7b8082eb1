"""A running migration whose follower was lost (an outage dropped its message, a worker died)
is followed again and settled; an operator can settle a stuck one by hand, audited."""

import time
from datetime import datetime, timedelta

import pytest
from conftest import FAST_SIMULATOR, make_migration, service_or_skip, shared_database_url
from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from dashboard import tasks
from dashboard.models import AuditEvent, Cluster, Migration, Policy
from dashboard.models.migration import UNFOLLOWED, silent
from harness.stack import ARTIFACTS, BEAT, SINGLE_WORKER, SUPERVISE, VENV_BIN, start, stop

OUTAGE = 10  # seconds Redis is away (the fault soak keeps the long outages)


def running_without_follower(suggested, monkeypatch) -> Migration:
    """Approved and started through the adapter, its follower's message lost."""
    monkeypatch.setattr(tasks.follow, "apply_async", lambda *a, **k: None)
    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    tasks.execute.apply(args=[suggested.pk])
    migration = Migration.objects.get(pk=suggested.pk)
    assert migration.state == "running" and migration.task_ids
    return migration


def ended_at_the_source(migration: Migration) -> None:
    """The simulator's migration has run its time (its tasks end at `ends_at`), without waiting
    out the simulator's shortest migration on the clock."""
    cluster = Cluster.objects.get(pk=migration.cluster_id)
    for task_id in migration.task_ids:
        cluster.source_state["tasks"][task_id]["ends_at"] = time.time() - 0.001
    Cluster.objects.filter(pk=cluster.pk).update(source_state=cluster.source_state)


@pytest.mark.django_db
def test_a_round_follows_again_a_running_migration_nobody_polls(suggested, monkeypatch):
    migration = running_without_follower(suggested, monkeypatch)
    queued = []
    monkeypatch.setattr(tasks.follow, "delay", queued.append)
    tasks.refollow_unfollowed(migration.cluster_id)
    assert queued == []  # just started: its follower may still come
    Migration.objects.filter(pk=migration.pk).update(started_at=timezone.now() - timedelta(seconds=20))
    tasks.refollow_unfollowed(migration.cluster_id)
    tasks.refollow_unfollowed(migration.cluster_id)  # a second round does not queue it twice
    assert queued == [migration.pk]
    ended_at_the_source(migration)
    tasks.follow.apply(args=[migration.pk])
    assert Migration.objects.get(pk=migration.pk).state == "done"


@pytest.mark.django_db
def test_of_two_followers_of_one_migration_one_goes_on(suggested, monkeypatch):
    migration = running_without_follower(suggested, monkeypatch)
    polls = []
    monkeypatch.setattr(tasks.follow, "apply_async", lambda *a, **k: polls.append(a))
    tasks.follow.apply(args=[migration.pk])
    tasks.follow.apply(args=[migration.pk])  # queued again by reconcile while the first chain lives
    assert len(polls) == 1


@pytest.mark.django_db
def test_an_operator_marks_a_stuck_migration_failed_and_it_is_audited(suggested, operator, client, monkeypatch):
    migration = running_without_follower(suggested, monkeypatch)
    client.force_login(operator)
    url = reverse("api:migration-fail", args=[migration.pk])
    response = client.post(url)
    assert response.status_code == 200
    assert response.json()["state"] == "failed"
    event = AuditEvent.objects.get(migration=migration, action="failed")
    assert event.actor == operator
    assert event.details["reason"] == "marked failed by operator; the adapter's task was not stopped"
    again = client.post(url)
    assert again.status_code == 409 and again.json()["detail"] == f"migration {migration.pk} is failed, not running"


@pytest.mark.django_db
def test_the_page_offers_mark_failed_once_the_follower_is_silent(suggested, monkeypatch):
    """The pushed migration says from when its follower counts as silent (models.migration.silent, the test
    reconcile follows it again by): the page shows "Mark failed" only from then on."""
    from dashboard.live.sender import migration_payload

    migration = running_without_follower(suggested, monkeypatch)
    Migration.objects.filter(pk=migration.pk).update(followed_at=timezone.now())
    silent_from = migration_payload(Migration.objects.get(pk=migration.pk))["silent_from"]
    assert timezone.now() < datetime.fromisoformat(silent_from)  # followed just now: not offered
    quiet = timezone.now() - UNFOLLOWED - timedelta(seconds=1)
    Migration.objects.filter(pk=migration.pk).update(followed_at=quiet)
    silent_from = datetime.fromisoformat(migration_payload(Migration.objects.get(pk=migration.pk))["silent_from"])
    assert silent_from <= timezone.now()
    assert Migration.objects.filter(silent(timezone.now()), pk=migration.pk).exists()  # reconcile agrees
    assert migration_payload(suggested)["silent_from"] is None  # only a running one


@pytest.mark.django_db
def test_a_viewer_cannot_mark_a_migration_failed(suggested, viewer, client, monkeypatch):
    migration = running_without_follower(suggested, monkeypatch)
    client.force_login(viewer)
    assert client.post(reverse("api:migration-fail", args=[migration.pk])).status_code == 403
    assert Migration.objects.get(pk=migration.pk).state == "running"


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers
def test_a_migration_running_across_a_redis_outage_settles_within_60_s(redis_server, monkeypatch):
    """The real worker and beat on PostgreSQL and a Redis of the test's own, stopped for OUTAGE
    seconds while a migration runs whose follower the outage dropped."""
    service_or_skip("CRS_TEST_DATABASE_URL")
    cluster = Cluster.objects.create(name="reconcile", source_kind="simulator", source_config=FAST_SIMULATOR)
    Policy.objects.filter(cluster=cluster).update(round_interval_s=1)
    Policy.objects.get(cluster=cluster).save()  # the beat schedule follows saved settings
    tasks.collect.apply(args=[cluster.pk])  # in-process: the round it queues goes nowhere
    cluster.refresh_from_db()
    guest = next(g["sid"] for g in cluster.snapshot["guests"] if g["node"] == "node01")
    suggested = make_migration(cluster, "suggested", guest)
    env = {"DATABASE_URL": shared_database_url(), "REDIS_URL": redis_server.url, "CRS_SECRET_KEY": settings.SECRET_KEY}
    processes = [
        start([*SUPERVISE, *SINGLE_WORKER], env, ARTIFACTS / "reconcile-worker.log", new_session=True),
        start([str(VENV_BIN / BEAT[0]), *BEAT[1:]], env, ARTIFACTS / "reconcile-beat.log"),
    ]
    try:
        migration = running_without_follower(suggested, monkeypatch)
        redis_server.stop()
        time.sleep(OUTAGE)
        redis_server.start()
        back = time.monotonic()
        while Migration.objects.get(pk=migration.pk).state == "running" and time.monotonic() - back < 90:
            time.sleep(0.5)
        settled = time.monotonic() - back
    finally:
        for process in processes:
            stop(process)
    assert Migration.objects.get(pk=migration.pk).state == "done"
    assert settled <= 60
    with (ARTIFACTS / "reconcile-figures.txt").open("a") as figures:
        figures.write(
            f"Redis down {OUTAGE} s under a running migration: settled (done) {settled:.1f} s after it returned\n"
        )


@pytest.mark.django_db
def test_a_starting_worker_reconciles_every_cluster(suggested, monkeypatch):
    migration = running_without_follower(suggested, monkeypatch)
    Migration.objects.filter(pk=migration.pk).update(started_at=timezone.now() - timedelta(seconds=20))
    queued = []
    monkeypatch.setattr(tasks.follow, "delay", lambda pk: queued.append(("follow", pk)))
    monkeypatch.setattr(tasks.execute, "delay", lambda pk: queued.append(("execute", pk)))
    tasks.reconcile.apply()
    assert queued == [("follow", migration.pk)]
