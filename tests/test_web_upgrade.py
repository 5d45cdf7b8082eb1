"""Upgrades keep data: a database made by the previous release (migration 0005: percent and
minute settings, rounds, migrations, the audit trail) reads the same after migrating, and
migrating back gives the old values back."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from dashboard.forms import PolicyForm
from dashboard.models import AuditEvent, Cluster, Migration, Policy, Round

PREVIOUS = [("dashboard", "0005_cluster_archived")]

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(targets):
    """Migrate to `targets`; the models of that state (like a migration's `apps`)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


@pytest.fixture
def previous_release():
    """A cluster as the previous release stored it; the database is migrated back to the latest after."""
    apps = migrate(PREVIOUS)
    try:
        cluster = apps.get_model("dashboard", "Cluster").objects.create(name="old", source_kind="simulator")
        apps.get_model("dashboard", "Policy").objects.create(
            cluster=cluster,
            threshold=30.0,
            margin=10.0,
            automatic_margin=25.0,
            cooldown=30,
            rejection_memory=60,
            suggestion_expiry=15,
            hold_duration=3,
        )
        Round = apps.get_model("dashboard", "Round")
        for decision, stored, served, minute in [("holding", 2, 2, 1), ("migrate", 0, 3, 2)]:
            Round.objects.create(
                cluster=cluster,
                at=f"2026-11-23T20:0{minute}:00Z",
                imbalance=0.42,
                threshold=0.3,
                decision=decision,
                hold_count=stored,
                explanation={"reason": "…", "hold_count": served, "hold_duration": 3},
                node_usage={"node01": {"cpu": 0.5, "memory": 0.25, "load": 0.5}},
            )
        migration = apps.get_model("dashboard", "Migration").objects.create(
            cluster=cluster,
            state="rejected",
            leader="vm:101",
            guests=["vm:101"],
            source="node01",
            target="node02",
            imbalance_before=0.42,
            imbalance_after=0.3,
            relative_gain=0.29,
            margin=0.1,
            method="bruteforce",
            reason="backup window",
        )
        AuditEvent = apps.get_model("dashboard", "AuditEvent")
        AuditEvent.objects.create(
            action="settings-changed",
            actor_name="alice",
            cluster=cluster,
            details={"changes": {"threshold": [30.0, 20.0], "cooldown": [30, 45], "suggestion_expiry": [15, 20]}},
        )
        AuditEvent.objects.create(
            action="rejected",
            actor_name="alice",
            cluster=cluster,
            migration=migration,
            details={"reason": "backup window"},
        )
        yield cluster.pk
    finally:
        migrate(latest())


def test_settings_history_and_audit_trail_read_the_same_after_the_upgrade(previous_release, admin_client):
    migrate(latest())

    policy = Policy.objects.get(cluster_id=previous_release)
    assert (policy.threshold, policy.margin, policy.automatic_margin) == (
        pytest.approx(0.3),
        pytest.approx(0.1),
        pytest.approx(0.25),
    )
    assert (policy.cooldown, policy.rejection_memory, policy.recommendation_expiry) == (
        timedelta(minutes=30),
        timedelta(minutes=60),
        timedelta(minutes=15),
    )
    assert policy.moves_per_round == 1  # what the previous release did; new clusters get 5
    shown = PolicyForm(instance=policy)
    assert [shown[name].value() for name in ("threshold", "cooldown", "recommendation_expiry")] == ["30", "30", "15"]

    rounds = list(Round.objects.filter(cluster_id=previous_release).values_list("decision", "hold_count", "imbalance"))
    assert rounds == [("holding", 2, 0.42), ("migrate", 3, 0.42)]  # hold_count: the rounds of the hold served
    assert Migration.objects.get(cluster_id=previous_release).reason == "backup window"

    changed = AuditEvent.objects.get(action="settings-changed").details["changes"]
    assert changed == {"threshold": [0.3, 0.2], "cooldown": [1800, 2700], "recommendation_expiry": [900, 1200]}
    body = admin_client.get(reverse("dashboard:audit")).content.decode()
    for change in ("threshold: 30 % → 20 %", "cooldown: 30 minutes → 45 minutes", "expiry: 15 minutes → 20 minutes"):
        assert change in body
    assert "backup window" in body

    page = admin_client.get(reverse("dashboard:cluster", args=[previous_release]))
    assert page.status_code == 200


def test_the_upgrade_can_be_undone(previous_release):
    migrate(latest())
    Cluster.objects.filter(pk=previous_release).update(hold_count=0)
    apps = migrate(PREVIOUS)
    policy = apps.get_model("dashboard", "Policy").objects.get(cluster_id=previous_release)
    assert (policy.threshold, policy.cooldown, policy.suggestion_expiry) == (pytest.approx(30), 30, 15)
    rounds = apps.get_model("dashboard", "Round").objects.filter(cluster_id=previous_release).order_by("at")
    assert list(rounds.values_list("hold_count", flat=True)) == [2, 0]
    event = apps.get_model("dashboard", "AuditEvent").objects.get(action="settings-changed")
    assert event.details["changes"] == {"threshold": [30, 20], "cooldown": [30, 45], "suggestion_expiry": [15, 20]}


BEFORE_UNITS = [("dashboard", "0022_n1task")]  # the last migration before the units in the names


@pytest.fixture
def before_units():
    """A round and a container's move as the release before the units in the field names stored them."""
    apps = migrate(BEFORE_UNITS)
    try:
        cluster = apps.get_model("dashboard", "Cluster").objects.create(name="old", source_kind="simulator")
        apps.get_model("dashboard", "Round").objects.create(
            cluster=cluster,
            at="2026-11-27T20:00:00Z",
            imbalance=0.42,
            threshold=0.3,
            decision="migrate",
            hold_count=3,
            explanation={"reason": "…"},
            node_usage={"node01": {"cpu": 0.5, "memory": 0.25}},
            duration=0.125,
        )
        apps.get_model("dashboard", "Migration").objects.create(
            cluster=cluster,
            state="suggested",
            leader="ct:201",
            guests=["ct:201"],
            source="node01",
            target="node02",
            imbalance_before=0.42,
            imbalance_after=0.3,
            relative_gain=0.29,
            margin=0.1,
            method="bruteforce",
            downtime=12.5,
        )
        yield cluster.pk
    finally:
        migrate(latest())


def test_a_round_and_a_move_read_the_same_once_their_fields_carry_the_unit(before_units, admin_client):
    migrate(latest())
    assert Round.objects.get(cluster_id=before_units).duration_s == 0.125
    assert Migration.objects.get(cluster_id=before_units).downtime_s == 12.5
    # The API's keys keep their names.
    assert admin_client.get("/api/v1/rounds/", {"cluster": before_units}).json()["results"][0]["duration"] == 0.125
    moves = admin_client.get("/api/v1/migrations/", {"cluster": before_units}).json()["results"]
    assert moves[0]["downtime"] == 12.5 and "downtime_s" not in moves[0]
    apps = migrate(BEFORE_UNITS)  # and back
    assert apps.get_model("dashboard", "Round").objects.get(cluster_id=before_units).duration == 0.125
    assert apps.get_model("dashboard", "Migration").objects.get(cluster_id=before_units).downtime == 12.5
