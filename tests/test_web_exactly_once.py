"""Exactly once: 50 concurrent approvals of one suggestion on PostgreSQL start one migration."""

import threading
import time

import pytest
from conftest import service_or_skip
from django.db import connection
from django.test import Client
from django.urls import reverse

from dashboard import views
from dashboard.models import AuditEvent, Migration

CLICKS = 50


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_approvals_start_one_migration(operator, suggested, monkeypatch):
    service_or_skip("CRS_TEST_DATABASE_URL")
    assert connection.vendor == "postgresql"
    started = []
    monkeypatch.setattr(views.execute, "delay", started.append)
    barrier = threading.Barrier(CLICKS)
    statuses = []

    def click():
        client = Client()
        client.force_login(operator)
        connection.close()  # back to the pool (10 connections), not held while all 50 wait here
        barrier.wait()
        try:
            statuses.append(client.post(reverse("dashboard:approve", args=[suggested.pk])).status_code)
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
