"""Stability guards and stale recommendations: cooldown, no way back, rejection memory, expiry,
superseding, the fresh re-check before execution, and the cap on concurrent migrations."""

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard import tasks
from dashboard.models import Cluster, Migration, Policy
from dashboard.tasks import balancing_round, collect

pytestmark = pytest.mark.django_db


def round_now(cluster, capture):
    with capture(execute=True):
        collect.apply(args=[cluster.pk])
        balancing_round.apply(args=[cluster.pk])


def migration(cluster, state, guest, source="node01", target="node06", **fields):
    return Migration.objects.create(
        cluster=cluster,
        state=state,
        leader=guest,
        guests=[guest],
        source=source,
        target=target,
        imbalance_before=0.5,
        imbalance_after=0.4,
        relative_gain=0.2,
        margin=0.1,
        method="bruteforce",
        **fields,
    )


def guest_on(cluster, node):
    return next(g["sid"] for g in cluster.snapshot["guests"] if g["node"] == node)


def test_a_migrated_guest_rests_and_is_not_sent_back_within_the_cooldown(collected):
    now = timezone.now()
    migration(collected, "done", "vm:1", finished_at=now - timedelta(minutes=29))
    migration(collected, "done", "vm:2", finished_at=now - timedelta(minutes=31))
    guards = Cluster.objects.get(pk=collected.pk).guards()
    assert guards.resting == {"vm:1"}
    assert guards.barred == {("vm:1", "node01")}


def test_a_rejected_move_is_barred_for_the_rejection_memory(collected):
    now = timezone.now()
    migration(collected, "rejected", "vm:1", target="node05", decided_at=now - timedelta(minutes=59))
    migration(collected, "rejected", "vm:2", target="node05", decided_at=now - timedelta(minutes=61))
    assert Cluster.objects.get(pk=collected.pk).guards().barred == {("vm:1", "node05")}


def test_rounds_never_recommend_a_rejected_move_again(cluster, django_capture_on_commit_callbacks):
    Policy.objects.filter(cluster=cluster).update(hold_duration=0)
    round_now(cluster, django_capture_on_commit_callbacks)
    first = Migration.objects.get()
    Migration.objects.transition(first.pk, "suggested", "rejected", None, reason="not that one")
    for _ in range(3):
        round_now(cluster, django_capture_on_commit_callbacks)
    later = Migration.objects.exclude(pk=first.pk)
    assert later.exists()
    assert not later.filter(leader=first.leader, target=first.target).exists()


def test_rounds_never_move_a_resting_guest(cluster, django_capture_on_commit_callbacks):
    Policy.objects.filter(cluster=cluster).update(hold_duration=0)
    round_now(cluster, django_capture_on_commit_callbacks)
    first = Migration.objects.get()
    Migration.objects.filter(pk=first.pk).update(state="done", finished_at=timezone.now())
    for _ in range(3):
        round_now(cluster, django_capture_on_commit_callbacks)
    later = Migration.objects.exclude(pk=first.pk)
    assert later.exists()  # rounds went on recommending, just not the resting guest
    assert not later.filter(leader=first.leader).exists()


def test_a_newer_round_supersedes_the_pending_recommendation(cluster, django_capture_on_commit_callbacks):
    Policy.objects.filter(cluster=cluster).update(hold_duration=0)
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    old = migration(cluster, "suggested", guest_on(cluster, "node03"), source="node03", target="node04")
    balancing_round.apply(args=[cluster.pk])
    old.refresh_from_db()
    new = Migration.objects.exclude(pk=old.pk).get()
    assert (old.state, old.reason) == ("expired", f"superseded by recommendation #{new.pk}, from a newer round")
    assert new.state == "suggested"


def test_an_undecided_recommendation_expires(collected, django_capture_on_commit_callbacks):
    # The round itself is holding: only the expiry can end the recommendation.
    Policy.objects.filter(cluster=collected).update(recommendation_expiry=timedelta(minutes=15))
    late = migration(
        collected, "suggested", guest_on(collected, "node01"), suggested_at=timezone.now() - timedelta(minutes=16)
    )
    round_now(collected, django_capture_on_commit_callbacks)
    late.refresh_from_db()
    assert (late.state, late.reason) == ("expired", "not decided within the recommendation expiry of 15 minutes")


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
    migration(suggested.cluster, "done", suggested.leader, source="node02", target="node01", finished_at=timezone.now())
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
    running = migration(cluster, "running", guest_on(cluster, "node02"), source="node02", task_ids=["sim:9"])
    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    tasks.execute.apply(args=[suggested.pk])
    assert Migration.objects.get(pk=suggested.pk).state == "approved"  # max 1 at a time (the default)
    with django_capture_on_commit_callbacks(execute=True):
        tasks.finish(running.pk, "done")
    assert queued == [suggested.pk]
    tasks.execute.apply(args=[suggested.pk])
    assert Migration.objects.get(pk=suggested.pk).state == "running"
