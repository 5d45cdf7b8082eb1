"""/metrics: a scrape parsed by prometheus_client's own parser; who may scrape."""

import ipaddress
from datetime import timedelta

import pytest
from conftest import FAST_SIMULATOR, migration_fields
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from dashboard import health
from dashboard.models import Cluster, Migration
from dashboard.tasks import balancing_round, collect

pytestmark = pytest.mark.django_db
COMPONENTS = ("database", "channel_layer", "worker", "beat")


def scrape(client, **extra) -> dict:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    return {family.name: family for family in text_string_to_metric_families(response.content.decode())}


def value(families, name, **labels):
    """The sample `name` with these labels (histograms' _bucket and _sum samples too)."""
    samples = [s for family in families.values() for s in family.samples if s.name == name]
    return next(s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items()))


def test_a_scrape_reports_each_clusters_figures(client, suggested):
    cluster = suggested.cluster
    balancing_round.apply(args=[cluster.pk])
    started = timezone.now() - timedelta(seconds=40)
    Migration.objects.filter(pk=suggested.pk).update(
        state="done", started_at=started, finished_at=started + timedelta(seconds=20)
    )
    Migration.objects.create(**{**migration_fields(suggested), "state": "suggested"})
    last = cluster.rounds.get()

    families = scrape(client)  # the test client comes from 127.0.0.1: loopback needs nothing more
    assert value(families, "crs_imbalance", cluster="test") == pytest.approx(last.imbalance)
    assert value(families, "crs_threshold", cluster="test") == pytest.approx(last.threshold)
    assert value(families, "crs_last_round_timestamp_seconds", cluster="test") == pytest.approx(last.at.timestamp())
    assert 0 < value(families, "crs_round_duration_seconds", cluster="test") < 60
    assert value(families, "crs_hold_duration_rounds", cluster="test") == cluster.policy.hold_duration
    assert value(families, "crs_pending_recommendations", cluster="test") == 1
    assert value(families, "crs_migrations", cluster="test", state="done") == 1
    assert value(families, "crs_source_up", cluster="test") == 1
    assert value(families, "crs_migration_duration_seconds_bucket", cluster="test", le="15") == 0
    assert value(families, "crs_migration_duration_seconds_bucket", cluster="test", le="30") == 1
    assert value(families, "crs_migration_duration_seconds_sum", cluster="test") == pytest.approx(20)


def test_a_scrape_costs_the_same_queries_for_one_cluster_or_many(client, suggested):
    """Prometheus scrapes every 15 s: a query per cluster (its last round, its finished
    migrations) made each scrape slower as clusters were added. Durations are bucketed at
    their edges: 15 s counts in le="15", 15.5 s only from le="30"."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            scrape(client)
        return len(captured)

    started = timezone.now()
    for seconds in (15, 15.5):
        Migration.objects.create(
            **{**migration_fields(suggested), "state": "done"},
            started_at=started,
            finished_at=started + timedelta(seconds=seconds),
        )
    balancing_round.apply(args=[suggested.cluster_id])
    one = queries()
    for n in range(4):
        other = Cluster.objects.create(name=f"other-{n}", source_kind="simulator", source_config=FAST_SIMULATOR)
        Migration.objects.create(
            **{**migration_fields(suggested), "cluster": other, "state": "failed"},
            started_at=started,
            finished_at=started + timedelta(seconds=n),
        )
        collect.apply(args=[other.pk])
        balancing_round.apply(args=[other.pk])
    assert queries() == one

    families = scrape(client)
    assert value(families, "crs_migration_duration_seconds_bucket", cluster="test", le="15") == 1
    assert value(families, "crs_migration_duration_seconds_bucket", cluster="test", le="30") == 2
    assert value(families, "crs_migration_duration_seconds_sum", cluster="test") == pytest.approx(30.5)
    assert value(families, "crs_migration_duration_seconds_bucket", cluster="other-3", le="5") == 1
    assert value(families, "crs_imbalance", cluster="other-3") == pytest.approx(
        Cluster.objects.get(name="other-3").rounds.get().imbalance
    )


def test_a_failing_source_shows(client, cluster):
    cluster.source_error = "connection refused"
    cluster.source_error_at = timezone.now()
    cluster.save()
    assert value(scrape(client), "crs_source_up", cluster="test") == 0


def test_other_addresses_need_the_allow_list_or_the_token(client, cluster, settings):
    settings.CRS_METRICS_TOKEN = "s3cret"
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert "crs_imbalance" in scrape(client, REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer s3cret")
    settings.CRS_METRICS_ALLOW = [ipaddress.ip_network("192.0.2.0/24")]
    assert "crs_imbalance" in scrape(client, REMOTE_ADDR="192.0.2.7")


def test_the_sample_grafana_dashboard_asks_only_for_served_metrics(client, suggested):
    import json
    import re
    from pathlib import Path

    balancing_round.apply(args=[suggested.cluster_id])
    served = {s.name for family in scrape(client).values() for s in family.samples}
    dashboard = json.loads((Path(__file__).parent.parent / "docs" / "grafana-dashboard.json").read_text())
    asked = {
        name for panel in dashboard["panels"] for t in panel["targets"] for name in re.findall(r"crs_\w+", t["expr"])
    }
    assert asked and asked <= served, asked - served


def test_components_are_up_by_their_heartbeats_and_down_once_silent(client, cluster, monkeypatch):
    """A worker beats every 2 s; beat may be silent two round intervals (at least 10 s)."""
    monkeypatch.setattr(health, "_memory", {})
    monkeypatch.setattr(health, "_written", {})
    clock = [1_800_000_000.0]
    monkeypatch.setattr(health.time, "time", lambda: clock[0])
    health.heartbeat("worker")
    health.heartbeat("beat")
    families = scrape(client)
    assert {c: value(families, "crs_component_up", component=c) for c in COMPONENTS} == dict.fromkeys(COMPONENTS, 1)

    clock[0] += 11  # the worker's 10 s are over; beat's are two 10-s round intervals
    cluster.policy.round_interval_s = 10
    cluster.policy.save()
    families = scrape(client)
    assert value(families, "crs_component_up", component="worker") == 0
    assert value(families, "crs_component_up", component="beat") == 1
    health_json = client.get("/healthz").json()
    assert health_json["worker"] == "down: no heartbeat for 11 s" and health_json["beat"] == "ok"

    clock[0] += 10
    assert client.get("/healthz").json()["beat"] == "down: no heartbeat for 21 s"


def test_a_proxmox_cluster_makes_the_proxmox_worker_a_part_with_its_own_heartbeat(client, cluster, monkeypatch):
    """The rounds' worker (-Q celery,whatif) does not stand for the Proxmox collects' (-Q proxmox)."""
    monkeypatch.setattr(health, "_memory", {})
    monkeypatch.setattr(health, "_written", {})
    assert "proxmox_worker" not in client.get("/healthz").json()  # a simulated cluster needs none
    Cluster.objects.create(name="pve", source_kind="proxmox", source_config={"host": "pve.example"})
    for component in health.worker_heartbeats(["celery", "whatif"]):
        health.heartbeat(component)
    said = client.get("/healthz").json()
    assert (said["worker"], said["proxmox_worker"]) == ("ok", "down: no heartbeat yet")
    assert value(scrape(client), "crs_component_up", component="proxmox_worker") == 0
    for component in health.worker_heartbeats(["proxmox"]):
        health.heartbeat(component)
    assert client.get("/healthz").json()["proxmox_worker"] == "ok"


def test_with_the_database_away_health_asks_it_nothing_more(cluster, monkeypatch, django_assert_num_queries):
    """A failed probe is the answer: a query for the Proxmox worker's need or beat's bound would
    wait out the pool's timeout (10 s) that the probe's 3 s spare /healthz."""

    def refused():
        raise OSError("connection refused")

    monkeypatch.setattr(health, "probe_database", refused)
    with django_assert_num_queries(0):
        parts = health.components()
    assert parts["database"] == "error: connection refused" and "proxmox_worker" in parts


def test_the_share_of_moves_that_paid_counts_the_judged_moves_of_the_last_days(client, suggested):
    finished = timezone.now() - timedelta(hours=2)
    for paid in (True, True, False, None):  # None: not judged yet, not counted
        Migration.objects.create(**{**migration_fields(suggested), "state": "done"}, finished_at=finished, paid=paid)
    old = timezone.now() - timedelta(days=8)  # before the page's 7 days
    Migration.objects.create(**{**migration_fields(suggested), "state": "done"}, finished_at=old, paid=False)
    assert value(scrape(client), "crs_moves_paid_share", cluster="test") == pytest.approx(2 / 3)
    Migration.objects.filter(paid__isnull=False).update(paid=None)
    assert "crs_moves_paid_share" not in {s.name for f in scrape(client).values() for s in f.samples}
