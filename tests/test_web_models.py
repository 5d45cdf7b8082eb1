"""Settings validation, the engine bridge, migration transitions and the round lock."""

import json
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from conftest import policy_form
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

import crs.model
import crs.snapshot
from dashboard.forms import PolicyForm
from dashboard.models import AuditEvent, Cluster, Migration, Policy

pytestmark = pytest.mark.django_db


def test_new_cluster_gets_proxmox_defaults(cluster):
    policy = cluster.policy
    assert (policy.threshold, policy.hold_duration, policy.margin, policy.method, policy.imbalance_scale) == (
        0.3,
        3,
        0.1,
        "bruteforce",
        "normalized",
    )
    assert policy.automation == "manual"


def test_engine_settings_are_the_stored_fractions(cluster):
    settings = cluster.policy.engine_settings()
    assert settings.threshold == pytest.approx(0.3)
    assert settings.margin == pytest.approx(0.1)
    assert settings.hold_duration == 3
    assert settings.auto_rebalance is False


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("threshold", 101, "threshold must be between 0 and 100 %"),
        ("threshold", -1, "threshold must be between 0 and 100 %"),
        ("margin", 150, "margin must be between 0 and 100 %"),
        ("hold_duration", -1, "hold duration must be between 0 and 1000 rounds"),
        ("hold_duration", 2.5, "hold duration must be a whole number, e.g. 3"),
        ("hold_duration", 10**12, "hold duration must be between 0 and 1000 rounds"),
        ("round_interval", 0, "round interval must be between 1 and 86400 seconds"),
        ("cooldown", -5, "cooldown must be between 0 and 10080 minutes"),
        ("rejection_memory", 20000, "rejection memory must be between 0 and 10080 minutes"),
        ("recommendation_expiry", 0, "recommendation expiry must be between 1 and 10080 minutes"),
        ("cooldown", "soon", "cooldown must be a number, e.g. 30.5 or 30,5"),
        ("moves_per_round", 0, "moves per round must be between 1 and 50"),
        ("moves_per_round", 51, "moves per round must be between 1 and 50"),
        ("target_imbalance", 40, "target imbalance must be at most the threshold"),
        ("load_floor", 120, "load floor must be between 0 and 100 %"),
        ("cpu_overcommit", 0.5, "cpu overcommit must be between 1 and 64"),
        ("cpu_overcommit", 65, "cpu overcommit must be between 1 and 64"),
        ("memory_reserve", 2048, "memory reserve must be between 0 and 1024 GiB"),
        ("memory_reserve", -1, "memory reserve must be between 0 and 1024 GiB"),
        ("max_migrations_per_node", 17, "max migrations per node must be between 1 and 16"),
        ("objective", "fast", "objective must be one of: even, pressure, both"),
        ("max_concurrent_migrations", 0, "concurrent migrations must be between 1 and 100"),
        ("threshold", "nan", "threshold must be a number, e.g. 30.5 or 30,5"),
        ("automatic_margin", 5, "automatic margin must be at least the margin"),
        ("threshold", "lots", "threshold must be a number, e.g. 30.5 or 30,5"),
        ("mode", "fancy", "mode must be one of: basic, static, dynamic"),
        ("method", "", "method is required"),
    ],
)
def test_bad_setting_is_refused_naming_the_field(cluster, field, value, message):
    form = PolicyForm(policy_form(**{field: value}), instance=cluster.policy)
    assert not form.is_valid()
    assert form[field].errors == [message]  # by the key the page posts
    assert Policy.objects.get(cluster=cluster).threshold == 0.3  # nothing stored changed


def test_settings_change_resets_hold_counter_and_audits_it(cluster, admin):
    Cluster.objects.filter(pk=cluster.pk).update(hold_count=2)
    form = PolicyForm(policy_form(threshold=20), instance=cluster.policy)
    assert form.is_valid(), form.errors
    form.save_by(admin)
    cluster.refresh_from_db()
    assert cluster.hold_count == 0
    event = AuditEvent.objects.get(action="settings-changed")
    assert (event.actor, event.details) == (admin, {"changes": {"threshold": [0.3, 0.2]}})


def test_the_form_takes_percent_minutes_and_gib_and_stores_fractions_durations_and_bytes(cluster, admin):
    changes = dict(
        threshold=20, target_imbalance=12.5, cooldown=45, recommendation_expiry=1.5, minimum_dwell=1, memory_reserve=2
    )
    form = PolicyForm(policy_form(**changes), instance=cluster.policy)
    assert form.is_valid(), form.errors
    form.save_by(admin)
    policy = Policy.objects.get(cluster=cluster)
    assert (policy.threshold, policy.target_imbalance) == (pytest.approx(0.2), pytest.approx(0.125))
    assert (policy.cooldown, policy.recommendation_expiry) == (timedelta(minutes=45), timedelta(seconds=90))
    assert policy.memory_reserve_bytes == 2 * 2**30
    shown = PolicyForm(instance=policy)  # and the page shows them as typed
    assert {name: shown[name].value() for name in changes} == {name: str(value) for name, value in changes.items()}
    assert policy.engine_settings().threshold == pytest.approx(0.2)


def test_every_engine_setting_reaches_the_engine(cluster):
    Policy.objects.filter(cluster=cluster).update(
        objective="pressure", memory_reserve_bytes=2**30, cpu_overcommit=2.5, load_floor=0.4, moves_per_round=7
    )
    settings = Policy.objects.get(cluster=cluster).engine_settings()
    assert (settings.preset, settings.moves_per_round, settings.target_imbalance, settings.objective) == (
        "product",
        7,
        0.2,
        "pressure",
    )
    assert (settings.memory_reserve_bytes, settings.cpu_overcommit, settings.load_floor) == (2**30, 2.5, 0.4)


def test_new_clusters_get_the_product_preset_and_switching_is_one_audited_click(admin_client, admin, cluster):
    policy = Policy.objects.get(cluster=cluster)
    assert (policy.preset, policy.moves_per_round, policy.target_imbalance) == ("product", 5, 0.2)
    response = admin_client.post(reverse("dashboard:preset", args=[cluster.pk]), {"preset": "proxmox"})
    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.preset, policy.moves_per_round, policy.target_imbalance) == ("proxmox", 1, None)
    assert policy.engine_settings() == crs.model.Settings(auto_rebalance=False, hold_duration=3)
    event = AuditEvent.objects.get(action="preset-switched")
    assert (event.actor, event.details["before"]["preset"], event.details["after"]["preset"]) == (
        admin,
        "product",
        "proxmox",
    )
    # By the settings' keys, as before usage_period was stored as usage_period_s.
    assert (event.details["before"]["usage_period"], event.details["after"]["usage_period"]) == (300, 0)
    assert "usage_period_s" not in event.details["after"]
    bad = admin_client.post(reverse("dashboard:preset", args=[cluster.pk]), {"preset": "vmware"})
    assert bad.status_code == 400
    assert bad.json() == {"errors": {"preset": ["preset must be proxmox or product, not 'vmware'"]}}


def test_an_operator_may_not_switch_the_preset(client, operator, cluster):
    client.force_login(operator)
    assert client.post(reverse("dashboard:preset", args=[cluster.pk]), {"preset": "proxmox"}).status_code == 403
    assert Policy.objects.get(cluster=cluster).preset == "product"


def test_round_interval_sets_the_clusters_beat_schedule(cluster, admin):
    form = PolicyForm(policy_form(round_interval=7), instance=cluster.policy)
    assert form.is_valid(), form.errors
    form.save_by(admin)
    task = PeriodicTask.objects.get(task="dashboard.tasks.collect_and_round")
    assert (task.interval.every, task.interval.period, json.loads(task.args)) == (7, "seconds", [cluster.pk])


def test_deleting_a_cluster_removes_its_schedule(cluster):
    cluster.delete()
    assert not PeriodicTask.objects.filter(task="dashboard.tasks.collect_and_round").exists()


def test_transitions_outside_the_state_machine_are_refused(suggested):
    with pytest.raises(AssertionError):
        Migration.objects.transition(suggested.pk, "suggested", "done", None)


def test_stale_suggestion_names_what_changed(suggested):
    snapshot = suggested.cluster.snapshot
    assert suggested.stale_reason(crs.snapshot.parse(snapshot)) == ""
    moved = {
        **snapshot,
        "guests": [{**g, "node": "node02"} if g["sid"] == suggested.leader else g for g in snapshot["guests"]],
    }
    assert (
        suggested.stale_reason(crs.snapshot.parse(moved))
        == f"{suggested.leader} is no longer running on node01 (now started on node02)"
    )


def test_two_rounds_of_one_cluster_never_overlap(cluster):
    assert Cluster.objects.lease_round(cluster.pk)
    assert not Cluster.objects.lease_round(cluster.pk)
    Cluster.objects.release_round(cluster.pk)
    assert Cluster.objects.lease_round(cluster.pk)


def held_by(cluster, holder: str) -> None:
    until = timezone.now() + Cluster.objects.ROUND_LEASE
    Cluster.objects.filter(pk=cluster.pk).update(round_lease_until=until, round_lease_holder=holder)


def test_a_round_lease_whose_holder_was_killed_is_taken_over_at_once(cluster):
    """A worker process SIGKILLed mid-round never releases its lease: the next round on its
    host runs at once, not a minute later."""
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    held_by(cluster, f"{socket.gethostname()}:{worker.pid}")
    assert not Cluster.objects.lease_round(cluster.pk), "the holder is alive: its round is running"
    worker.kill()
    worker.wait()
    assert Cluster.objects.lease_round(cluster.pk)
    assert not Cluster.objects.lease_round(cluster.pk), "taken over: held again"


def test_a_round_lease_held_on_another_host_waits_for_its_lapse(cluster):
    held_by(cluster, "another-host:1")
    assert not Cluster.objects.lease_round(cluster.pk)
    Cluster.objects.filter(pk=cluster.pk).update(round_lease_until=timezone.now() - timedelta(seconds=1))
    assert Cluster.objects.lease_round(cluster.pk)


def test_a_round_never_releases_a_lease_it_no_longer_holds(cluster):
    """A round that outlived its lease (a hung worker) must not free the round now running."""
    held_by(cluster, "another-host:1")
    Cluster.objects.release_round(cluster.pk)
    assert not Cluster.objects.lease_round(cluster.pk)


def test_a_moves_cost_reads_the_migration_speed_in_mib_s_and_the_benefit_horizon_in_minutes(cluster, admin):
    form = PolicyForm(policy_form(migration_speed=100, benefit_horizon=180), instance=cluster.policy)
    assert form.is_valid(), form.errors
    form.save_by(admin)
    policy = Policy.objects.get(cluster=cluster)
    assert policy.migration_bytes_s == 100 * 2**20  # bytes per second, as the API speaks
    settings = policy.engine_settings()
    assert (settings.migration_mib_s, settings.benefit_horizon) == (100.0, 3 * 3600.0)
