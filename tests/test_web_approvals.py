"""Approvals in one place: a person's approve and reject (page API), the round's own approval
(automation level), the state machine's once-only transitions, and 50 concurrent clicks."""

import threading
import time

import pytest
from conftest import run_rounds, service_or_skip, set_policy
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard import tasks
from dashboard.models import AuditEvent, Migration

CLICKS = 50


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_approvals_start_one_migration(operator, suggested, monkeypatch):
    service_or_skip("CRS_TEST_DATABASE_URL")
    assert connection.vendor == "postgresql"
    started = []
    monkeypatch.setattr(tasks.execute, "delay", started.append)
    barrier = threading.Barrier(CLICKS)
    statuses = []

    def click():
        client = Client()
        client.force_login(operator)
        connection.close()  # back to the pool (10 connections), not held while all 50 wait here
        barrier.wait()
        try:
            statuses.append(client.post(reverse("api:recommendation-approve", args=[suggested.pk])).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=click) for _ in range(CLICKS)]
    begun = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    elapsed = time.monotonic() - begun
    print(f"{CLICKS} concurrent approvals in {elapsed:.2f} s")
    assert sorted(statuses) == [200] * CLICKS  # each click sees the migration approved (or further)
    assert started == [suggested.pk]
    assert AuditEvent.objects.filter(action="approved").count() == 1
    assert Migration.objects.get(pk=suggested.pk).state == "approved"


def test_approve_queues_execution_once(admin_client, suggested, django_capture_on_commit_callbacks, monkeypatch):
    started = []
    monkeypatch.setattr("dashboard.tasks.execute.delay", started.append)
    url = reverse("api:recommendation-approve", args=[suggested.pk])
    with django_capture_on_commit_callbacks(execute=True):
        first = admin_client.post(url)
        second = admin_client.post(url)
    assert (first.status_code, second.status_code) == (200, 200)
    assert "already" not in first.json()
    assert second.json()["already"] == f"migration {suggested.pk} was approved already: this changed nothing"
    assert started == [suggested.pk]
    assert AuditEvent.objects.filter(action="approved").count() == 1
    assert Migration.objects.get(pk=suggested.pk).state == "approved"


def test_approving_a_rejected_recommendation_says_where_it_is(admin_client, suggested):
    admin_client.post(reverse("api:recommendation-reject", args=[suggested.pk]), {"reason": "not now"})
    response = admin_client.post(reverse("api:recommendation-approve", args=[suggested.pk]))
    assert response.status_code == 409
    assert response.json()["detail"] == f"migration {suggested.pk} is rejected (not now), not a pending recommendation"


def test_reject_keeps_the_reason(admin_client, admin, suggested):
    response = admin_client.post(reverse("api:recommendation-reject", args=[suggested.pk]), {"reason": "backup window"})
    assert response.status_code == 200
    migration = Migration.objects.get(pk=suggested.pk)
    assert (migration.state, migration.reason, migration.decided_by) == ("rejected", "backup window", admin)
    assert AuditEvent.objects.get(action="rejected").details == {"reason": "backup window"}


def test_approving_a_stale_recommendation_expires_it(admin_client, suggested):
    cluster = suggested.cluster
    cluster.snapshot["guests"] = [
        {**g, "node": "node03"} if g["sid"] == suggested.leader else g for g in cluster.snapshot["guests"]
    ]
    cluster.save()
    response = admin_client.post(reverse("api:recommendation-approve", args=[suggested.pk]))
    assert response.status_code == 409
    assert Migration.objects.get(pk=suggested.pk).state == "expired"
    assert "is no longer running on node01 (now started on node03)" in response.json()["detail"]


def test_viewer_may_not_approve(client, viewer, suggested):
    client.force_login(viewer)
    assert client.post(reverse("api:recommendation-approve", args=[suggested.pk])).status_code == 403
    assert Migration.objects.get(pk=suggested.pk).state == "suggested"


def test_approve_needs_post(admin_client, suggested):
    assert admin_client.get(reverse("api:recommendation-approve", args=[suggested.pk])).status_code == 405


@pytest.mark.parametrize(
    "automation, gain, approves",
    [("manual", 0.9, False), ("automatic", 0.11, True), ("partial", 0.24, False), ("partial", 0.25, True)],
)
def test_automation_level_decides_who_approves(cluster, automation, gain, approves):
    from dashboard.automation import state as automation_of

    cluster.policy.automation = automation
    assert automation_of(cluster, timezone.now()).approves_itself(gain) is approves


def test_transition_happens_once(suggested, admin):
    assert Migration.objects.transition(suggested.pk, "suggested", "approved", admin, decided_by=admin)
    assert not Migration.objects.transition(suggested.pk, "suggested", "approved", admin, decided_by=admin)
    assert not Migration.objects.transition(suggested.pk, "suggested", "rejected", admin)
    suggested.refresh_from_db()
    assert (suggested.state, suggested.decided_by) == ("approved", admin)
    assert list(AuditEvent.objects.values_list("action", "actor")) == [("approved", admin.pk)]


@pytest.mark.django_db
def test_partial_automation_waits_for_people_below_the_automatic_margin(
    cluster, django_capture_on_commit_callbacks, monkeypatch
):
    monkeypatch.setattr("dashboard.tasks.execute.delay", lambda pk: None)
    set_policy(cluster, hold_duration=0, automation="partial", automatic_margin=1.0)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    assert set(Migration.objects.values_list("state", flat=True)) == {"suggested"}
