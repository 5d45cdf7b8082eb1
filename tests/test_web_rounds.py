"""Balancing rounds as the dashboard records them: the hold, one recommendation at a time, what
supersedes and expires a recommendation, and the guards rounds respect (dashboard/rounds.py,
dashboard/expiry.py, tasks.balancing_round)."""

from datetime import timedelta

import pytest
from conftest import guest_on, make_migration, run_rounds, set_policy
from django.utils import timezone

from dashboard.models import AuditEvent, Cluster, Migration, Policy, Round
from dashboard.tasks import balancing_round, collect

pytestmark = pytest.mark.django_db


def run_round(cluster, capture):
    run_rounds(cluster, 1, capture)


def test_rounds_hold_then_recommend(cluster, django_capture_on_commit_callbacks):
    run_rounds(cluster, 3, django_capture_on_commit_callbacks)
    decisions = list(Round.objects.values_list("decision", "hold_count"))
    assert decisions[:2] == [("holding", 1), ("holding", 2)]
    assert decisions[2] == ("migrate", 3)  # the hold served, as the explanation says
    migration = Migration.objects.get()
    assert (migration.state, migration.automatic) == ("suggested", False)
    assert AuditEvent.objects.get().action == "suggested"


def test_hold_counter_is_persisted_between_rounds(cluster, django_capture_on_commit_callbacks):
    run_rounds(cluster, 2, django_capture_on_commit_callbacks)
    assert Cluster.objects.get(pk=cluster.pk).hold_count == 2


def test_one_recommendation_at_a_time(cluster, django_capture_on_commit_callbacks):
    set_policy(cluster, hold_duration=0)
    run_rounds(cluster, 3, django_capture_on_commit_callbacks)
    assert Migration.objects.count() == 1


def test_recommendation_expires_when_imbalance_falls_below_threshold(cluster, django_capture_on_commit_callbacks):
    set_policy(cluster, hold_duration=0)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    set_policy(cluster, threshold=0.99)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    migration = Migration.objects.get()
    assert migration.state == "expired"
    assert migration.reason.startswith("no longer recommended: ")


def test_a_round_already_running_is_not_doubled(collected):
    Cluster.objects.claim_round(collected.pk)
    balancing_round.apply(args=[collected.pk])
    assert not Round.objects.exists()


def test_rounds_never_recommend_a_rejected_move_again(cluster, django_capture_on_commit_callbacks):
    Policy.objects.filter(cluster=cluster).update(hold_duration=0)
    run_round(cluster, django_capture_on_commit_callbacks)
    first = Migration.objects.get()
    Migration.objects.transition(first.pk, "suggested", "rejected", None, reason="not that one")
    for _ in range(3):
        run_round(cluster, django_capture_on_commit_callbacks)
    later = Migration.objects.exclude(pk=first.pk)
    assert later.exists()
    assert not later.filter(leader=first.leader, target=first.target).exists()


def test_rounds_never_move_a_resting_guest(cluster, django_capture_on_commit_callbacks):
    Policy.objects.filter(cluster=cluster).update(hold_duration=0)
    run_round(cluster, django_capture_on_commit_callbacks)
    first = Migration.objects.get()
    Migration.objects.filter(pk=first.pk).update(state="done", finished_at=timezone.now())
    for _ in range(3):
        run_round(cluster, django_capture_on_commit_callbacks)
    later = Migration.objects.exclude(pk=first.pk)
    assert later.exists()  # rounds went on recommending, just not the resting guest
    assert not later.filter(leader=first.leader).exists()


def test_a_newer_round_supersedes_the_pending_recommendation(cluster, django_capture_on_commit_callbacks):
    Policy.objects.filter(cluster=cluster).update(hold_duration=0)
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    old = make_migration(cluster, "suggested", guest_on(cluster, "node03"), source="node03", target="node04")
    balancing_round.apply(args=[cluster.pk])
    old.refresh_from_db()
    new = Migration.objects.exclude(pk=old.pk).get()
    assert (old.state, old.reason) == ("expired", f"superseded by recommendation #{new.pk}, from a newer round")
    assert new.state == "suggested"


def test_an_undecided_recommendation_expires(collected, django_capture_on_commit_callbacks):
    # The round itself is holding: only the expiry can end the recommendation.
    Policy.objects.filter(cluster=collected).update(recommendation_expiry=timedelta(minutes=15))
    late = make_migration(
        collected, "suggested", guest_on(collected, "node01"), suggested_at=timezone.now() - timedelta(minutes=16)
    )
    run_round(collected, django_capture_on_commit_callbacks)
    late.refresh_from_db()
    assert (late.state, late.reason) == ("expired", "not decided within the recommendation expiry of 15 minutes")
