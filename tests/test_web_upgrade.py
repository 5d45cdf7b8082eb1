"""Upgrades keep data: a database made by the previous release (migration 0005: percent and
minute settings, rounds, migrations, the audit trail) reads the same after migrating, and
migrating back gives the old values back."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from dashboard.forms import PolicyForm
from dashboard.models import AuditEvent, Cluster, GuestSample, Migration, NodeSample, Policy, Round

PREVIOUS = [("dashboard", "0005_cluster_archived")]

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(targets):
    """Migrate to `targets`; the models of that state (like a migration's `apps`)."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


def latest():
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


# A row of each kind as every release since 0005 can store it; each fixture adds or overrides
# the fields its release had.
ROWS = {
    "Round": {
        "imbalance": 0.42,
        "threshold": 0.3,
        "decision": "migrate",
        "hold_count": 3,
        "explanation": {"reason": "…"},
        "node_usage": {"node01": {"cpu": 0.5, "memory": 0.25}},
    },
    "Migration": {
        "state": "suggested",
        "leader": "vm:101",
        "guests": ["vm:101"],
        "source": "node01",
        "target": "node02",
        "imbalance_before": 0.42,
        "imbalance_after": 0.3,
        "relative_gain": 0.29,
        "margin": 0.1,
        "method": "bruteforce",
    },
    "NodeSample": {"node": "node01", "cpu": 0.5, "memory": 0.25},
    "GuestSample": {"guest": "vm:101", "node": "node01", "cpu_usage": 1.5, "mem_usage_bytes": 2.0**30},
}


def write(apps, model: str, cluster, **fields):
    """A `model` row of `cluster` as the release of `apps` (a migration state's models) stored it."""
    return apps.get_model("dashboard", model).objects.create(cluster=cluster, **{**ROWS.get(model, {}), **fields})


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
        for decision, stored, served, minute in [("holding", 2, 2, 1), ("migrate", 0, 3, 2)]:
            write(
                apps,
                "Round",
                cluster,
                at=f"2026-11-23T20:0{minute}:00Z",
                decision=decision,
                hold_count=stored,
                explanation={"reason": "…", "hold_count": served, "hold_duration": 3},
                node_usage={"node01": {"cpu": 0.5, "memory": 0.25, "load": 0.5}},
            )
        migration = write(apps, "Migration", cluster, state="rejected", reason="backup window")
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
        write(apps, "Round", cluster, at="2026-11-27T20:00:00Z", duration=0.125)
        write(apps, "Migration", cluster, leader="ct:201", guests=["ct:201"], downtime=12.5)
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


BEFORE_MORE_UNITS = [("dashboard", "0025_overview")]  # the last migration before 0026's renames


@pytest.fixture
def before_more_units():
    """Settings and history rows as the release before 0026 stored them: round_interval,
    memory_reserve, usage_period and span without their unit in the name."""
    apps = migrate(BEFORE_MORE_UNITS)
    try:
        cluster = apps.get_model("dashboard", "Cluster").objects.create(name="old", source_kind="simulator")
        write(apps, "Policy", cluster, round_interval=30, memory_reserve=2 * 2**30, usage_period=120)
        at = "2026-11-27T20:00:00Z"
        write(apps, "Round", cluster, at=at, span=300, samples=30, imbalance_max=0.5, decision="downsampled")
        write(apps, "NodeSample", cluster, at=at, span=300, samples=30)
        write(apps, "GuestSample", cluster, at=at, span=60, samples=6)
        yield cluster.pk
    finally:
        migrate(latest())


def span_indexes() -> dict[str, list[str]]:
    """The (span, at) indexes of the sample tables, by name: the columns they cover."""
    with connection.cursor() as cursor:
        found = {}
        for table in ("dashboard_nodesample", "dashboard_guestsample"):
            for name, index in connection.introspection.get_constraints(cursor, table).items():
                if index["index"] and name.endswith(("_span_88fce9_idx", "_span_85664e_idx")):
                    found[name] = index["columns"]
        return found


def test_settings_and_history_read_the_same_once_their_fields_carry_the_unit(before_more_units, admin_client):
    before = span_indexes()
    migrate(latest())
    policy = Policy.objects.get(cluster_id=before_more_units)
    assert (policy.round_interval_s, policy.memory_reserve_bytes, policy.usage_period_s) == (30, 2 * 2**30, 120)
    assert Round.objects.get(cluster_id=before_more_units).span_s == 300
    assert NodeSample.objects.get(cluster_id=before_more_units).span_s == 300
    assert GuestSample.objects.get(cluster_id=before_more_units).span_s == 60
    # The indexes followed their column and kept their names.
    assert before == {"dashboard_n_span_88fce9_idx": ["span", "at"], "dashboard_g_span_85664e_idx": ["span", "at"]}
    assert span_indexes() == {
        "dashboard_n_span_88fce9_idx": ["span_s", "at"],
        "dashboard_g_span_85664e_idx": ["span_s", "at"],
    }
    # The API's keys, the page's form and the engine keep the names without the unit.
    settings = admin_client.get(f"/api/v1/clusters/{before_more_units}/settings/").json()
    assert (settings["round_interval"], settings["memory_reserve"], settings["usage_period"]) == (30, 2 * 2**30, 120)
    assert not {"round_interval_s", "memory_reserve_bytes", "usage_period_s"} & set(settings)
    page = admin_client.get(reverse("dashboard:cluster", args=[before_more_units])).content.decode()
    assert 'name="round_interval" value="30"' in page and 'name="memory_reserve" value="2"' in page
    assert policy.engine_settings().usage_period == 120.0
    apps = migrate(BEFORE_MORE_UNITS)  # and back
    old = apps.get_model("dashboard", "Policy").objects.get(cluster_id=before_more_units)
    assert (old.round_interval, old.memory_reserve, old.usage_period) == (30, 2 * 2**30, 120)
    for model, span in (("Round", 300), ("NodeSample", 300), ("GuestSample", 60)):
        assert apps.get_model("dashboard", model).objects.get(cluster_id=before_more_units).span == span, model
    assert span_indexes() == before
