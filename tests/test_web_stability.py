"""Stability guards and stale migrations: cooldown, no way back, rejection memory (the guards rounds use),
the fresh re-check before execution, and the cap on concurrent migrations."""

from datetime import timedelta

import pytest
from conftest import guest_on, make_migration
from django.utils import timezone

from dashboard import tasks
from dashboard.models import Cluster, Migration
from dashboard.tasks import balancing_round, collect

pytestmark = pytest.mark.django_db


def round_now(cluster, capture):
    with capture(execute=True):
        collect.apply(args=[cluster.pk])
        balancing_round.apply(args=[cluster.pk])


def test_a_migrated_guest_rests_and_is_not_sent_back_within_the_cooldown(collected):
    now = timezone.now()
    make_migration(collected, "done", "vm:1", finished_at=now - timedelta(minutes=29))
    make_migration(collected, "done", "vm:2", finished_at=now - timedelta(minutes=31))
    guards = Cluster.objects.get(pk=collected.pk).guards()
    assert guards.in_cooldown == {"vm:1"}
    assert guards.barred == {("vm:1", "node01")}


def test_a_rejected_move_is_barred_for_the_rejection_memory(collected):
    now = timezone.now()
    make_migration(collected, "rejected", "vm:1", target="node05", decided_at=now - timedelta(minutes=59))
    make_migration(collected, "rejected", "vm:2", target="node05", decided_at=now - timedelta(minutes=61))
    assert Cluster.objects.get(pk=collected.pk).guards().barred == {("vm:1", "node05")}


def test_execution_rechecks_a_fresh_snapshot_and_expires_a_moved_guest(suggested, monkeypatch):
    monkeypatch.setattr(tasks.follow, "apply_async", lambda *a, **k: None)
    cluster = suggested.cluster
    placement = {**cluster.source_state["placement"], suggested.leader: "node03"}  # moved since the snapshot
    Cluster.objects.filter(pk=cluster.pk).update(source_state={**cluster.source_state, "placement": placement})
    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    tasks.execute.apply(args=[suggested.pk])
    suggested.refresh_from_db()
    assert suggested.state == "expired"
    assert suggested.reason == f"{suggested.leader} is no longer running on node01 (now started on node03)"
    assert Cluster.objects.get(pk=cluster.pk).source_state["next_task"] == 1  # nothing was started


def test_execution_expires_a_move_whose_guest_entered_its_cooldown(suggested):
    make_migration(
        suggested.cluster, "done", suggested.leader, source="node02", target="node01", finished_at=timezone.now()
    )
    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    tasks.execute.apply(args=[suggested.pk])
    suggested.refresh_from_db()
    assert (suggested.state, suggested.reason) == (
        "expired",
        f"{suggested.leader} is in its cooldown after a recent migration",
    )


def test_concurrent_migrations_wait_for_a_free_slot(suggested, django_capture_on_commit_callbacks, monkeypatch):
    queued = []
    monkeypatch.setattr(tasks.execute, "delay", queued.append)
    monkeypatch.setattr(tasks.follow, "apply_async", lambda *a, **k: None)
    cluster = suggested.cluster
    running = make_migration(cluster, "running", guest_on(cluster, "node02"), source="node02", task_ids=["sim:9"])
    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    tasks.execute.apply(args=[suggested.pk])
    assert Migration.objects.get(pk=suggested.pk).state == "approved"  # max 1 at a time (the default)
    with django_capture_on_commit_callbacks(execute=True):
        tasks.finish(running.pk, "done")
    assert queued == [suggested.pk]
    tasks.execute.apply(args=[suggested.pk])
    assert Migration.objects.get(pk=suggested.pk).state == "running"
