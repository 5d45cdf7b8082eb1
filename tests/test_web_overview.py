"""The overview (dashboard/overview.py, pages/overview.py): every cluster on one line, the landing
page once there are several; its queries do not grow with the clusters; one push per batch."""

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from conftest import FAST_SIMULATOR, make_migration
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard import overview, tasks
from dashboard.live import sender as live
from dashboard.models import Cluster


def clusters(count: int, first: int = 0) -> list:
    return [
        Cluster.objects.create(name=f"c{i:03d}", source_kind="simulator", source_config={**FAST_SIMULATOR, "seed": i})
        for i in range(first, first + count)
    ]


def rounds_of(cluster_list, django_capture_on_commit_callbacks, count: int = 1) -> None:
    for _ in range(count):
        for cluster in cluster_list:
            with django_capture_on_commit_callbacks(execute=True):
                tasks.collect.apply(args=[cluster.pk])
                tasks.balancing_round.apply(args=[cluster.pk])


@pytest.mark.django_db
def test_one_cluster_lands_on_its_page_and_several_on_the_overview(admin_client, collected):
    page = admin_client.get("/").content.decode()
    assert 'id="overview"' not in page and 'id="chart"' in page  # today's landing page
    other = Cluster.objects.create(name="second", source_kind="simulator", source_config=FAST_SIMULATOR)
    page = admin_client.get("/").content.decode()
    names = re.findall(r'<td data-label="cluster"><a href="/clusters/(\d+)/">([^<]+)</a>', page)
    assert names == [(str(other.pk), "second"), (str(collected.pk), "test")]
    assert re.search(r'aria-current="page">all clusters</a>', page)
    archived = Cluster.objects.filter(pk=other.pk)
    archived.update(archived=True)
    assert 'id="overview"' not in admin_client.get("/").content.decode()


@pytest.mark.django_db
def test_a_row_shows_what_needs_attention(admin_client, collected, django_capture_on_commit_callbacks):
    second = Cluster.objects.create(name="second", source_kind="simulator", source_config=FAST_SIMULATOR)
    rounds_of([collected], django_capture_on_commit_callbacks)
    make_migration(collected, "suggested", "vm:100")
    make_migration(collected, "suggested", "vm:101")
    make_migration(collected, "running", "vm:102")
    Cluster.objects.filter(pk=second.pk).update(source_error="connection refused", stop_here_at=timezone.now())
    Cluster.objects.filter(pk=collected.pk).update(n1={"survives": False, "verdict": "losing node01 overloads node02"})
    by_name = {row["name"]: row for row in overview.rows()}
    row, idle = by_name["test"], by_name["second"]
    last = collected.rounds.latest("at")
    assert (row["imbalance"], row["threshold"], row["above"]) == (last.imbalance, 0.3, last.imbalance > 0.3)
    assert (row["waiting"], row["running"], row["n1"], row["automation"]) == (2, 1, "fails", "manual")
    assert row["n1_verdict"] == "losing node01 overloads node02" and not row["late"]
    assert row["sparkline"]["points"] and row["sparkline"]["high"] == last.imbalance
    assert (idle["source_error"], idle["automation"], idle["late"], idle["imbalance"]) == (
        "connection refused",
        "stopped",
        True,
        None,
    )
    page = admin_client.get("/clusters/").content.decode()
    line = re.search(rf'<tr id="cluster-{collected.pk}".*?</tr>', page, re.S).group(0)
    assert 'data-waiting="2"' in line and 'data-running="1"' in line and 'data-n1="fails"' in line
    assert f"{last.imbalance * 100:.1f} % / 30.0 %" in re.sub(r"<[^>]+>", "", line)


@pytest.mark.django_db
def test_the_overview_reads_as_many_rows_for_200_clusters_as_for_2(admin_client):
    few = clusters(2)
    for cluster in few:
        make_migration(cluster, "suggested", "vm:100")

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get("/clusters/").status_code == 200
        return len(captured)

    at_two = queries()
    for cluster in clusters(198, first=2):
        make_migration(cluster, "running", "vm:101")
    assert queries() == at_two


def test_the_sparkline_keeps_the_highest_imbalance_of_each_half_hour_for_a_day():
    start = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    trend: list = []
    for minutes, imbalance in [(0, 0.2), (10, 0.5), (20, 0.3), (40, 0.1)]:
        trend = overview.trend_after(trend, start + timedelta(minutes=minutes), imbalance)
    half_hour = int(start.timestamp())
    assert trend == [[half_hour, 0.5], [half_hour + 1800, 0.1]]
    later = overview.trend_after(trend, start + timedelta(hours=24, minutes=5), 0.4)
    assert later == [[half_hour + 1800, 0.1], [half_hour + 86400, 0.4]]  # the first half hour aged out
    drawn = overview.sparkline(later, 0.3, start + timedelta(hours=24, minutes=5))
    heights = [float(p.split(",")[1]) for p in drawn["points"].split()]
    assert heights[1] < drawn["threshold_y"] < heights[0]  # 0.4 above the dashed 0.3, 0.1 below it
    assert drawn["collecting"] == ""
    # A fresh install's one point draws no line: it says when the next point comes (issue 38 item 9).
    fresh = overview.sparkline(trend[:1], 0.3, start + timedelta(minutes=20))
    assert fresh["collecting"] == "collecting: next point in 10 min"
    assert overview.sparkline([], 0.3, start + timedelta(minutes=25))["collecting"] == "no round in the last 24 h"


@pytest.mark.django_db
def test_rounds_of_many_clusters_make_one_overview_push_per_window(monkeypatch, django_capture_on_commit_callbacks):
    from django.core.cache import cache

    cache.clear()
    monkeypatch.setattr(tasks, "OVERVIEW_WINDOW", 600)  # longer than the rounds take on a busy machine
    queued = []
    monkeypatch.setattr(tasks.push_overview, "apply_async", lambda **options: queued.append(options))
    five = clusters(5)
    rounds_of(five, django_capture_on_commit_callbacks)
    assert queued == [{"countdown": 600}]  # five rounds, one push queued
    assert all(len(Cluster.objects.get(pk=c.pk).trend) == 1 for c in five)

    layer = get_channel_layer()
    page = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(live.OVERVIEW, page)
    tasks.push_overview()  # as the worker runs it when the window closes
    event = async_to_sync(layer.receive)(page)
    pushed = json.loads(event["text"])
    assert pushed["type"] == "overview" and [r["name"] for r in pushed["rows"]] == [c.name for c in five]
    assert all(r["last_round_at"] for r in pushed["rows"])

    cache.delete(tasks.OVERVIEW_KEY)  # the window closed: the next round opens the next one
    rounds_of(five[:1], django_capture_on_commit_callbacks)
    assert len(queued) == 2


@pytest.mark.django_db
def test_past_six_clusters_the_navigation_names_the_shown_one_beside_all_clusters(admin_client):
    made = clusters(7)
    html = admin_client.get(f"/clusters/{made[3].pk}/").content.decode()
    nav = re.search(r'<nav aria-label="cluster pages"[^>]*>(.*?)</nav>', html, re.S).group(1)
    assert re.findall(r'<a href="/clusters/\d+/"[^>]*>([^<]+)</a>', nav) == [made[3].name]
    assert re.search(r'<a href="/clusters/"[^>]*>all clusters</a>', nav)
