"""The next hour's forecast in the live product: guests' peaks kept in the history (folded by
MAX), read by the round when the cluster's `forecast` setting is on, and shown per node as a
mark on its bars (the round's node usage, pushed and embedded) and in the history API."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from dashboard import forecasts, history, rounds
from dashboard.models import GuestSample, NodeSample, Policy, Round
from tests.conftest import set_policy

pytestmark = pytest.mark.django_db

PEAK_CORES = 6.0


@pytest.fixture(autouse=True)
def fresh_forecasts():
    """A test database reuses cluster ids: no forecast kept from another test's cluster."""
    forecasts._cache.clear()
    yield
    forecasts._cache.clear()


def daily_history(cluster, sid, node, days: float, peak_in: timedelta, now: datetime) -> None:
    """5-minute rows of `sid` for the last `days` days: 0.5 cores, and PEAK_CORES for ten
    minutes each day at the time of day `peak_in` from `now` (the admin's hour H, seen at H-1)."""
    start = now - timedelta(days=days)
    slot = timedelta(seconds=300)
    at = datetime.fromtimestamp(int(start.timestamp()) // 300 * 300, tz=UTC)
    rows = []
    while at < now - timedelta(minutes=5):
        into_day = (at - (now + peak_in)) % timedelta(days=1)
        cpu = PEAK_CORES if into_day < timedelta(minutes=10) else 0.5
        rows.append(
            GuestSample(
                cluster=cluster,
                at=at,
                span_s=300,
                samples=30,
                guest=sid,
                node=node,
                cpu_usage=cpu,
                mem_usage_bytes=2**30,
                cpu_peak=cpu,
                mem_peak_bytes=2**30,
            )
        )
        at += slot
    GuestSample.objects.bulk_create(rows)


def a_guest(cluster):
    guest = cluster.snapshot["guests"][0]
    return guest["sid"], guest["node"]


def round_now(cluster):
    rounds.run(cluster, cluster.latest_snapshot())
    return Round.objects.filter(cluster=cluster).latest("at")


def test_a_guest_peaking_daily_at_h_marks_its_node_at_h_minus_1(collected, admin_client):
    """Three days of a guest peaking at 6 cores each day 30 minutes from now: the round, an hour
    ahead, puts its node's forecast peak that much above the node's use now, in the pushed node
    usage (the bar's mark) and in the history API; its forecast beat the last hour's peak."""
    sid, node = a_guest(collected)
    daily_history(collected, sid, node, days=3.5, peak_in=timedelta(minutes=30), now=timezone.now())

    usage = round_now(collected).node_usage
    snapshot = collected.latest_snapshot()
    guest, threads = snapshot.guest(sid), snapshot.node(node).cpus
    assert usage[node]["forecast"]["cpu"] == pytest.approx(
        usage[node]["cpu"] + (PEAK_CORES - guest.cpu_usage) / threads
    )
    assert usage[node]["forecast"]["cpu"] > usage[node]["cpu"] + 0.1
    assert [name for name, u in usage.items() if "forecast" in u] == [node]  # no other guest has history

    api = admin_client.get(f"/api/v1/clusters/{collected.pk}/history/").json()["forecast"]
    assert api["nodes"][node] == usage[node]["forecast"]
    state = admin_client.get(f"/api/v1/clusters/{collected.pk}/state/").json()
    assert state["settings"]["forecast"] == "on"


def test_the_peak_two_hours_off_is_not_foretold(collected):
    """The same guest peaking two hours from now: the next hour is flat, as the last was; such a
    forecast never foretold a rise, never earned its place, and the round is reactive for it."""
    sid, node = a_guest(collected)
    daily_history(collected, sid, node, days=3.5, peak_in=timedelta(hours=2), now=timezone.now())
    assert forecasts.applied(collected.pk, collected.latest_snapshot(), timezone.now()).guest(sid).forecast is None
    soon = forecasts.applied(collected.pk, collected.latest_snapshot(), timezone.now() + timedelta(hours=1.5))
    assert soon.guest(sid).forecast is not None and soon.guest(sid).forecast.cpu == pytest.approx(PEAK_CORES)


def test_a_guest_with_less_than_three_days_of_history_has_no_forecast(collected, admin_client):
    sid, node = a_guest(collected)
    daily_history(collected, sid, node, days=2.9, peak_in=timedelta(minutes=30), now=timezone.now())
    usage = round_now(collected).node_usage
    assert not any("forecast" in u for u in usage.values())
    assert admin_client.get(f"/api/v1/clusters/{collected.pk}/history/").json()["forecast"] is None


def test_with_the_setting_off_no_forecast_is_filled(collected, admin_client):
    sid, node = a_guest(collected)
    daily_history(collected, sid, node, days=2.5, peak_in=timedelta(minutes=30), now=timezone.now())
    set_policy(collected, forecast="off")
    collected.refresh_from_db()
    snapshot = collected.latest_snapshot()
    assert snapshot.settings.forecast == "off"
    assert all(g.forecast is None for g in forecasts.applied(collected.pk, snapshot, timezone.now()).guests)
    assert not any("forecast" in u for u in round_now(collected).node_usage.values())
    assert admin_client.get(f"/api/v1/clusters/{collected.pk}/history/").json()["forecast"] is None


def test_the_forecast_is_on_under_product_and_off_under_proxmox(cluster, admin):
    policy = Policy.objects.get(cluster=cluster)
    assert policy.preset == "product" and policy.forecast == "on"
    assert policy.engine_settings().forecast == "on"
    policy.switch_preset("proxmox", admin)
    assert Policy.objects.get(cluster=cluster).forecast == "off"
    policy.switch_preset("product", admin)
    assert Policy.objects.get(cluster=cluster).forecast == "on"


def test_the_settings_api_takes_the_forecast(cluster, admin_client):
    url = f"/api/v1/clusters/{cluster.pk}/settings/"
    assert admin_client.get(url).json()["forecast"] == "on"
    assert admin_client.patch(url, {"forecast": "off"}, content_type="application/json").status_code == 200
    assert Policy.objects.get(cluster=cluster).forecast == "off"
    bad = admin_client.patch(url, {"forecast": "maybe"}, content_type="application/json")
    assert bad.status_code == 400


def test_a_one_minute_spike_survives_folding_into_5_minute_and_hourly_rows(cluster, settings):
    """Collects every 10 s at 1 core, one minute at 7 cores: the 1-minute, 5-minute and hourly
    rows keep 7 as their peak while their means stay near 1 (on SQLite, and on PostgreSQL with
    CRS_TEST_DATABASE_URL)."""
    settings.CRS_HISTORY_RAW = timedelta(hours=1)
    settings.CRS_HISTORY_FIVE_MINUTE = timedelta(hours=2)
    now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    rows = []
    for hours_ago in (1.5, 3):  # one hour ends as 5-minute rows, the other as one hourly row
        hour = now - timedelta(hours=hours_ago)
        hour = hour.replace(minute=0)
        for i in range(360):
            at = hour + timedelta(seconds=10 * i)
            cpu = 7.0 if 20 * 60 <= 10 * i < 21 * 60 else 1.0
            rows.append(
                GuestSample(
                    cluster=cluster,
                    at=at,
                    guest="vm:100",
                    node="node01",
                    cpu_usage=cpu,
                    mem_usage_bytes=cpu * 2**30,
                    cpu_peak=cpu,
                    mem_peak_bytes=cpu * 2**30,
                )
            )
    GuestSample.objects.bulk_create(rows)
    history.downsample(now)
    hourly = GuestSample.objects.get(span_s=3600)
    assert hourly.cpu_peak == 7.0 and hourly.mem_peak_bytes == 7.0 * 2**30
    assert hourly.cpu_usage == pytest.approx(1.1) and hourly.samples == 360
    five = GuestSample.objects.filter(span_s=300).order_by("at")
    assert [r.cpu_peak for r in five] == [1.0] * 4 + [7.0] + [1.0] * 7
    assert five[4].cpu_usage == pytest.approx(2.2)  # 6 of its 30 collects at 7


def test_guest_rows_stay_28_days_when_the_hourly_tier_is_shorter(cluster, settings):
    settings.CRS_HISTORY_HOURLY = timedelta(days=10)
    now = timezone.now()
    for days in (20, 30):
        at = now - timedelta(days=days)
        GuestSample.objects.create(
            cluster=cluster,
            at=at,
            span_s=3600,
            guest="vm:100",
            node="node01",
            cpu_usage=1,
            mem_usage_bytes=1,
            cpu_peak=1,
            mem_peak_bytes=1,
        )
        NodeSample.objects.create(cluster=cluster, at=at, span_s=3600, node="node01", cpu=0.1, memory=0.1)
    history.downsample(now)
    assert GuestSample.objects.filter(at__gt=now - timedelta(days=29)).count() == 1
    assert GuestSample.objects.count() == 1 and NodeSample.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_gives_old_guest_rows_their_mean_as_peak_and_each_preset_its_forecast():
    """Rows stored before the peaks existed get their means as peaks (a low estimate: the
    forecast of those days reads low, never high); a `proxmox` cluster gets the forecast off."""
    before, after = [("dashboard", "0026_more_units_in_names")], [("dashboard", "0027_forecast")]
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    try:
        apps = MigrationExecutor(connection).loader.project_state(before).apps
        Cluster = apps.get_model("dashboard", "Cluster")
        for name, preset in (("old-product", "product"), ("old-proxmox", "proxmox")):
            c = Cluster.objects.create(name=name, source_kind="simulator")
            apps.get_model("dashboard", "Policy").objects.create(cluster=c, preset=preset)
        apps.get_model("dashboard", "GuestSample").objects.create(
            cluster=c, at="2026-05-01T10:00:00Z", span_s=3600, samples=360, guest="vm:1", node="n", cpu_usage=1.5,
            mem_usage_bytes=2e9,
        )  # fmt: skip
        MigrationExecutor(connection).migrate(after)
        row = GuestSample.objects.get(guest="vm:1")
        assert (row.cpu_peak, row.mem_peak_bytes) == (1.5, 2e9)
        assert dict(Policy.objects.values_list("cluster__name", "forecast")) == {
            "old-product": "on",
            "old-proxmox": "off",
        }
    finally:
        MigrationExecutor(connection).migrate(latest)
