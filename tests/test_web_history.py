"""History that lasts: samples at every collect, downsampled as they age, a range API with migration markers."""

import math
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from dashboard import history
from dashboard.models import GuestSample, NodeSample, Round
from tests.conftest import make_migration

pytestmark = pytest.mark.django_db

NODES, GUESTS = 12, 60  # 12 nodes × 5 guests (the tiers and means; bench/history.py has the scale)
NOW = datetime(2026, 6, 1, 12, 0, 30, tzinfo=UTC)


def imbalance_at(epoch: float) -> float:
    """The generated rounds' imbalance: a two-hour wave, so every bucket's mean is known."""
    return 0.3 + 0.2 * math.sin(epoch / 7200.0)


def generate(cluster, days: int, round_s: int, node_s: int, guest_s: int) -> None:
    """`days` of rounds, node and guest samples ending at NOW, made by PostgreSQL in bulk."""
    start = NOW - timedelta(days=days)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO dashboard_round (cluster_id, at, imbalance, threshold, decision, hold_count, explanation,"
            " node_usage, span_s, samples) SELECT %s, t, 0.3 + 0.2 * sin(extract(epoch from t) / 7200.0), 0.25,"
            " 'below-threshold', 0, '{}'::jsonb, '{}'::jsonb, 0, 1"
            " FROM generate_series(%s::timestamptz, %s::timestamptz, make_interval(secs => %s)) t",
            [cluster.pk, start, NOW, round_s],
        )
        cursor.execute(
            "INSERT INTO dashboard_nodesample (cluster_id, at, node, cpu, memory, span_s, samples)"
            " SELECT %s, t, 'node' || n, (n %% 4) / 4.0, 0.5, 0, 1"
            " FROM generate_series(%s::timestamptz, %s::timestamptz, make_interval(secs => %s)) t,"
            " generate_series(1, %s) n",
            [cluster.pk, start, NOW, node_s, NODES],
        )
        cursor.execute(
            "INSERT INTO dashboard_guestsample (cluster_id, at, guest, node, cpu_usage, mem_usage_bytes, span_s,"
            " samples, cpu_peak, mem_peak_bytes) SELECT %s, t, 'vm:' || (100 + g), 'node' || (g %% 12 + 1), g / 100.0,"
            " g * 1048576.0, 0, 1, g / 100.0, g * 1048576.0"
            " FROM generate_series(%s::timestamptz, %s::timestamptz, make_interval(secs => %s)) t,"
            " generate_series(1, %s) g",
            [cluster.pk, start, NOW, guest_s, GUESTS],
        )


@pytest.mark.skipif(not os.environ.get("CRS_TEST_DATABASE_URL"), reason="the 90-day run is PostgreSQL's")
def test_ninety_days_fold_into_tiers_on_postgresql(cluster, settings):
    """92 days at 12 nodes × 5 guests: raw for 24 h, 5-minute means for 7 days, hourly for 90, nothing older;
    the means are right, no round is lost before it is dropped, and a second run finds nothing to do."""
    generate(cluster, days=92, round_s=60, node_s=600, guest_s=3600)
    generated_in_90_days = Round.objects.filter(at__gte=NOW - timedelta(days=90)).count()

    done = history.downsample(NOW)
    assert done["round 5-minute"] > 0 and done["round hourly"] > 0 and done["round dropped"] > 0

    day, week, quarter = NOW - timedelta(hours=24), NOW - timedelta(days=7), NOW - timedelta(days=90)
    for model, raw_span in ((Round, 0), (NodeSample, 0), (GuestSample, 60)):
        spans = lambda model=model, **f: set(model.objects.filter(**f).values_list("span_s", flat=True))  # noqa: E731
        assert spans(at__gte=day + timedelta(minutes=5), at__lt=NOW - timedelta(minutes=2)) == {raw_span}, model
        assert spans(at__lt=day - timedelta(minutes=5), at__gte=week + timedelta(hours=1)) == {300}, model
        assert spans(at__lt=week - timedelta(hours=1)) == {3600}, model
        assert not model.objects.filter(at__lt=quarter - timedelta(hours=1)).exists(), model

    # An hour 30 days back is one row per series holding the weighted mean of its 60 rounds.
    hour = datetime(2026, 5, 2, 7, 0, tzinfo=UTC)
    folded = Round.objects.get(cluster=cluster, at=hour)
    expected = [imbalance_at((hour + timedelta(minutes=m, seconds=30)).timestamp()) for m in range(60)]  # :30 past
    assert folded.samples == 60 and folded.span_s == 3600 and folded.decision == "downsampled"
    assert folded.imbalance == pytest.approx(sum(expected) / 60, abs=1e-9)
    assert folded.imbalance_max == pytest.approx(max(expected), abs=1e-9)
    assert NodeSample.objects.filter(at=hour).count() == NODES
    assert GuestSample.objects.filter(at=hour).count() == GUESTS
    assert GuestSample.objects.get(at=hour, guest="vm:150").samples == 1  # one an hour

    # Every round of the last 90 days is still counted (the oldest hour straddles the cut).
    kept = sum(Round.objects.filter(at__gte=quarter).values_list("samples", flat=True))
    assert abs(kept - generated_in_90_days) <= 60

    # What is left per day of history: a bounded number of rows.
    assert Round.objects.count() <= 24 * 60 + 6 * 288 + 83 * 24 + 30
    assert NodeSample.objects.count() <= NODES * (24 * 6 + 6 * 288 + 83 * 24 + 30)

    again = history.downsample(NOW)
    assert not any(count for name, count in again.items() if name != "guest 1-minute"), again


def test_downsampling_runs_on_sqlite_as_the_embedded_mode_does(tmp_path):
    """The same folding SQL on SQLite (`make run`): a fresh database, a day and a half of rounds, folded."""
    script = (
        "from datetime import timedelta; from django.utils import timezone;"
        "from dashboard.models import Cluster, Round; from dashboard import history;"
        "c = Cluster.objects.create(name='s', source_kind='simulator');"
        "now = timezone.now();"
        "Round.objects.bulk_create(Round(cluster=c, at=now - timedelta(minutes=m), imbalance=0.1 + (m % 2) * 0.2,"
        " threshold=0.3, decision='holding', hold_count=0, explanation={}, node_usage={}) for m in range(36 * 60));"
        "history.downsample(now);"
        "old = Round.objects.filter(at__lt=now - timedelta(hours=25));"
        "print(sorted(set(old.values_list('span_s', flat=True))),"
        " round(sum(r.imbalance * r.samples for r in old) / sum(r.samples for r in old), 3),"
        " Round.objects.filter(at__gte=now - timedelta(hours=23)).count(),"
        " sum(Round.objects.values_list('samples', flat=True)))"
    )
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path}/crs.sqlite3",
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    env.pop("REDIS_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, check=True, capture_output=True)
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script], env=env, check=True, capture_output=True, text=True
    ).stdout.split("\n")[-2]
    assert out == f"[300] 0.2 {23 * 60 + 1} {36 * 60}", out


def test_a_collect_stores_node_and_guest_samples(collected):
    snapshot = collected.snapshot
    assert NodeSample.objects.filter(cluster=collected).count() == len(snapshot["nodes"])
    guests = GuestSample.objects.filter(cluster=collected)
    assert guests.count() == len(snapshot["guests"])
    first = snapshot["guests"][0]
    sample = guests.get(guest=first["sid"])
    assert sample.node == first["node"] and sample.cpu_usage == pytest.approx(first.get("cpu_usage", 0.0))


def round_at(cluster, at, imbalance, **fields):
    return Round.objects.create(
        cluster=cluster,
        at=at,
        imbalance=imbalance,
        threshold=0.3,
        decision="holding",
        hold_count=1,
        explanation={},
        node_usage={},
        **fields,
    )


def test_the_range_api_gives_the_trend_and_migration_markers(client, cluster, operator, admin):
    now = timezone.now()
    round_at(cluster, now - timedelta(hours=1), 0.4)
    round_at(cluster, now - timedelta(hours=20), 0.2)
    round_at(cluster, now - timedelta(days=5), 0.5, span_s=300, samples=30, imbalance_max=0.7)
    approved = make_migration(
        cluster, "done", "vm:101", started_at=now - timedelta(hours=2), decided_by=operator, decided_at=now
    )
    make_migration(cluster, "failed", "vm:102", "node02", "node03", started_at=now - timedelta(days=3), automatic=True)
    make_migration(cluster, "suggested", "vm:103")  # never started: no marker
    client.force_login(admin)

    short = client.get(f"/api/v1/clusters/{cluster.pk}/history/").json()  # 3 h by default
    assert short["range"] == "3h" and [p["imbalance"] for p in short["points"]] == [0.4]
    assert short["markers"] == [
        {
            "id": approved.pk,
            "at": approved.started_at.isoformat(),
            "guests": ["vm:101"],
            "source": "node01",
            "target": "node06",
            "state": "done",
            "approved_by": operator.username,
            "imbalance_before": 0.5,
            "imbalance_after": 0.4,
        }
    ]

    week = client.get(f"/api/v1/clusters/{cluster.pk}/history/?range=7d").json()
    assert week["resolution"] == 300
    assert [p["imbalance"] for p in week["points"]] == [0.5, 0.2, 0.4]
    assert week["points"][0]["imbalance_max"] == 0.7 and week["points"][0]["rounds"] == 30
    assert [(m["guests"], m["approved_by"]) for m in week["markers"]] == [
        (["vm:102"], "automatic"),
        (["vm:101"], operator.username),
    ]

    bad = client.get(f"/api/v1/clusters/{cluster.pk}/history/?range=1y")
    assert bad.status_code == 400 and "range must be one of: 3h, 24h, 7d, 30d, 90d" in str(bad.json())


def test_a_viewer_reads_the_history_and_an_outsider_does_not(client, cluster, viewer, outsider):
    client.force_login(viewer)
    assert client.get(f"/api/v1/clusters/{cluster.pk}/history/?range=90d").status_code == 200
    client.force_login(outsider)
    assert client.get(f"/api/v1/clusters/{cluster.pk}/history/").status_code == 403
