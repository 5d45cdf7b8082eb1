"""Capacity and power on the web side: the page and the API show how many more standard guests
fit (the engine's count, with and without N+1, and why no more), the sizes are edited and
stored (a bad one is refused naming the field), the trend is recorded once an hour however
many rounds run, and an underused simulated cluster gets a power-down suggestion."""

import re
from datetime import timedelta

import pytest
from conftest import run_rounds as rounds_only
from django.utils import timezone

import crs.capacity
import crs.n1
import crs.power
from crs.fits import Limits
from dashboard.models import AuditEvent, CapacitySample, CapacitySettings, Cluster
from dashboard.tasks import capacity_counts, collect, n1_refresh

GIB = 2**30
# Few guests on big nodes: most of the cluster idles, so nodes could sleep.
UNDERUSED = {"migration_mib_s": 1e9, "nodes": 6, "hot_nodes": 2, "node_sizes": [{"cpus": 256, "memory_gib": 2048}]}


def run_rounds(cluster, count, capture):
    """`count` rounds, each followed by the capacity count and the N+1 refresh it queues when they
    are due (the in-memory broker here has no worker: test_web_tasks runs them on a real one)."""
    for _ in range(count):
        rounds_only(cluster, 1, capture)
        capacity_counts.apply(args=[cluster.pk])
        n1_refresh.apply(args=[cluster.pk])


def api(cluster, what=""):
    return f"/api/v1/clusters/{cluster.pk}/capacity{what}/"


def page(cluster):
    return f"/clusters/{cluster.pk}/capacity/"


@pytest.fixture
def underused(db):
    cluster = Cluster.objects.create(name="quiet", source_kind="simulator", source_config=UNDERUSED)
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    return cluster


@pytest.mark.django_db
def test_the_page_and_the_api_show_the_engines_counts_the_fits_rule_and_a_power_down_suggestion(
    admin_client, underused, django_capture_on_commit_callbacks
):
    body = admin_client.get(api(underused)).json()  # before any round: the plain counts, N+1 pending
    assert body["sizes"][1]["count"] > 0 and body["sizes"][1]["count_n1"] is None
    assert "counted by the next round" in admin_client.get(page(underused)).content.decode()
    run_rounds(underused, 1, django_capture_on_commit_callbacks)
    snapshot = underused.latest_snapshot()
    medium = crs.capacity.Size(4, 8 * GIB)
    plain = crs.capacity.capacity(snapshot, medium, Limits())
    safe = crs.capacity.capacity(snapshot, medium, Limits(), n1_safe=True)
    squeeze = crs.power.squeeze(snapshot, medium)
    assert plain.count > safe.count > 0 and len(squeeze.power_off) >= 2  # the cluster is what the test needs
    assert crs.n1.survives(snapshot, Limits())

    body = admin_client.get(api(underused)).json()
    row = next(r for r in body["sizes"] if r["size"] == "medium")
    assert (row["text"], row["count"], row["count_n1"]) == ("4c,8g", plain.count, safe.count)
    assert row["limited_by_n1"]["n1"] > 0 and body["overcommitted"] == {} and body["n1_safe_now"] is True
    power = body["power"]
    assert power["power_off"] == list(squeeze.power_off)
    assert len(power["moves"]) == len(squeeze.moves) > 0
    assert power["watts_saved"] == 120.0 * len(squeeze.power_off)  # the default idle power
    assert "wake-on-LAN is out of scope" in power["note"]

    answer = admin_client.get(page(underused))
    assert answer.status_code == 200
    html = answer.content.decode()
    assert "configured memory is within the node&#x27;s RAM less the memory reserve" in html
    assert "CPU overcommit ratio 4" in html and "No node is over-committed now." in html
    assert f'<td data-label="how many more fit now" class="count">{plain.count}</td>' in html
    assert f'<td data-label="keeping N+1" class="count-n1">{safe.count}</td>' in html
    assert f"Could be emptied and powered down now: <strong>{', '.join(squeeze.power_off)}</strong>" in html
    assert f"{len(squeeze.moves)} migrations" in html and f"{120 * len(squeeze.power_off)} W" in html
    assert "wake-on-LAN is out of scope" in html
    # in the admin's words: Ganeti's names stay in the docs' comparison
    assert not re.search(r"Ganeti|hsqueeze|hspace|FailMem|FailCPU|FailN1|vcpu_ratio", html)
    assert "no room to recover a lost node (N+1)" in html and "Power saving: room is counted" in html
    # a trend point says the hour it stands for, not "58 min ago" from the start of that hour
    hour = timezone.now().strftime("%H")
    assert f"(hour from {hour}:00 UTC)" in html and "<time datetime" not in html.split('id="trend"')[1]
    # the cluster page links to it
    assert (
        f'href="{page(underused)}" id="capacity-link"'
        in admin_client.get(f"/clusters/{underused.pk}/").content.decode()
    )


@pytest.mark.django_db
def test_existing_over_commitment_is_reported(admin_client, collected):
    """The demo trace crowds the hot nodes beyond RAM less nothing: the page says so, the count skips them."""
    snapshot = collected.latest_snapshot()
    over = crs.capacity.capacity(snapshot, crs.capacity.Size(1, 2 * GIB)).overcommitted
    assert over
    assert admin_client.get(api(collected)).json()["overcommitted"] == over
    html = admin_client.get(page(collected)).content.decode()
    assert "Already over-committed:" in html and all(node in html for node in over)


@pytest.mark.django_db
def test_sizes_edited_on_the_page_and_through_the_api_are_stored_audited_and_counted(
    admin_client, underused, django_capture_on_commit_callbacks
):
    form = {"small": "2c,4g", "medium": "6c,12g", "large": "16c,64g", "idle_watts": "200", "standby": ""}
    answer = admin_client.post(page(underused), form)
    assert answer.status_code == 302
    stored = CapacitySettings.objects.get(cluster=underused)
    assert stored.sizes["medium"] == {"cores": 6.0, "memory_bytes": 12 * GIB} and stored.idle_watts == 200
    event = AuditEvent.objects.get(action="capacity-settings-changed")
    assert event.details["after"]["large"] == {"cores": 16.0, "memory_bytes": 64 * GIB}

    answer = admin_client.patch(
        api(underused, "-settings"), {"large": {"cores": 12, "memory_bytes": 48 * GIB}}, content_type="application/json"
    )
    assert answer.status_code == 200 and answer.json()["large"] == {"cores": 12.0, "memory_bytes": 48 * GIB}
    assert answer.json()["medium"]["cores"] == 6.0  # a PATCH keeps the others

    body = admin_client.get(api(underused)).json()
    new_large = crs.capacity.Size(12, 48 * GIB)
    expected = crs.capacity.capacity(underused.latest_snapshot(), new_large).count
    large = next(r for r in body["sizes"] if r["size"] == "large")
    assert (large["text"], large["count"], large["count_n1"]) == ("12c,48g", expected, None)
    assert body["power"]["standard"] == "6c,12g"  # the medium size is the standard guest
    assert body["power"]["watts_saved"] == 200.0 * len(body["power"]["power_off"])
    html = admin_client.get(page(underused)).content.decode()
    assert 'value="12c,48g"' in html and "<strong>large</strong> 12c,48g" in html
    run_rounds(underused, 1, django_capture_on_commit_callbacks)  # the next round counts it keeping N+1
    snapshot = underused.latest_snapshot()
    large = next(r for r in admin_client.get(api(underused)).json()["sizes"] if r["size"] == "large")
    assert large["count_n1"] == crs.capacity.capacity(snapshot, new_large, n1_safe=True).count


@pytest.mark.django_db
def test_bad_sizes_are_refused_with_400_naming_the_field_and_nothing_is_stored(admin_client, underused, viewer):
    form = {"small": "lots", "medium": "4c,8g", "large": "0c,8g", "idle_watts": "-5", "standby": "node99"}
    answer = admin_client.post(page(underused), form)
    assert answer.status_code == 400
    html = answer.content.decode()
    assert 'data-field="small">small: size &#x27;lots&#x27;: expected cores and memory, e.g. 4c,8g' in html
    assert 'data-field="large">large: size &#x27;0c,8g&#x27;' in html
    assert 'data-field="idle_watts">idle_watts: watts per idle node, between 0 and 100000' in html
    assert 'data-field="standby">standby: node99 not a node of quiet (node01, node02' in html
    assert 'value="lots"' in html  # what was typed stays
    assert not CapacitySettings.objects.exists()

    settings = api(underused, "-settings")
    for body, field, words in [
        ({"medium": {"cores": 0, "memory_bytes": 8 * GIB}}, "medium", "medium: cores must be between 0.1 and 4096"),
        ({"small": {"cores": 1, "memory_bytes": 1000}}, "small", "small: memory_bytes must be between 67108864"),
        ({"idle_watts": 1e9}, "idle_watts", "idle_watts: watts per idle node, between 0 and 100000"),
        ({"standby": ["node01", "node01"]}, "standby", "standby: a node is named twice"),
    ]:
        answer = admin_client.patch(settings, body, content_type="application/json")
        assert answer.status_code == 400, body
        assert answer.json()[field][0].startswith(words)
    answer = admin_client.patch(
        settings, {"large": {"cores": "many", "memory_bytes": GIB}}, content_type="application/json"
    )
    assert answer.status_code == 400 and answer.json()["large"] == {"cores": ["A valid number is required."]}
    answer = admin_client.put(settings, {"idle_watts": 100}, content_type="application/json")
    assert answer.status_code == 400 and {"small", "medium", "large", "standby"} <= set(answer.json())
    assert not CapacitySettings.objects.exists()

    admin_client.force_login(viewer)
    assert admin_client.get(settings).status_code == 200
    assert admin_client.patch(settings, {"idle_watts": 90}, content_type="application/json").status_code == 403
    assert admin_client.post(page(underused), {**form, "small": "1c,1g"}).status_code == 403


@pytest.mark.django_db
def test_the_trend_is_stored_once_an_hour_not_every_round(admin_client, underused, django_capture_on_commit_callbacks):
    run_rounds(underused, 3, django_capture_on_commit_callbacks)
    assert underused.rounds.count() == 3
    rows = list(CapacitySample.objects.filter(cluster=underused))
    assert sorted(r.size for r in rows) == ["large", "medium", "small"]  # one figure per size, not per round
    assert len({r.hour for r in rows}) == 1 and rows[0].hour.minute == 0
    # One figure draws no line: the cell says so rather than stay blank (issue 38 item 9).
    first = admin_client.get(page(underused)).content.decode()
    assert first.count("collecting: one figure an hour, the line starts with the second") == 3
    assert '<svg class="sparkline"' not in first

    # The stored hour is over (moved back one hour); a figure older than 30 days is dropped.
    CapacitySample.objects.update(hour=rows[0].hour - timedelta(hours=1))
    CapacitySample.objects.create(
        cluster=underused,
        hour=rows[0].hour - timedelta(days=31),
        size="small",
        cores=1,
        memory_bytes=GIB,
        count=1,
        count_n1=1,
    )
    run_rounds(underused, 2, django_capture_on_commit_callbacks)
    assert CapacitySample.objects.filter(cluster=underused).count() == 6
    assert not CapacitySample.objects.filter(hour__lt=rows[0].hour - timedelta(days=30)).exists()

    medium = next(r for r in admin_client.get(api(underused)).json()["trend"] if r["size"] == "medium")
    assert len(medium["points"]) == 2
    html = admin_client.get(page(underused)).content.decode()
    assert '<svg class="sparkline"' in html
    latest = medium["points"][-1]
    assert f'class="latest">{latest["count"]} ({latest["count_n1"]} keeping N+1)' in html

    # An edited size replaces this hour's figure of that size at the next round.
    admin_client.patch(
        api(underused, "-settings"), {"small": {"cores": 2, "memory_bytes": 2 * GIB}}, content_type="application/json"
    )
    run_rounds(underused, 1, django_capture_on_commit_callbacks)
    latest_small = CapacitySample.objects.filter(cluster=underused, size="small").latest("hour")
    assert latest_small.cores == 2 and CapacitySample.objects.filter(cluster=underused).count() == 6


@pytest.mark.django_db
def test_standby_nodes_are_suggested_to_power_on_when_room_is_short_and_a_failed_node_is_not(admin_client):
    """node01 has room for no medium guest (hsqueeze's minimal is 2): the standby node02 is to
    be woken; node03 is offline too but not standby (failed, say): never suggested."""
    nodes = [
        {"name": "node01", "cpus": 16, "memory_bytes": 16 * GIB},
        {"name": "node02", "cpus": 32, "memory_bytes": 64 * GIB, "online": False},
        {"name": "node03", "cpus": 32, "memory_bytes": 64 * GIB, "online": False},
    ]
    guests = [{"sid": f"vm:{100 + i}", "node": "node01", "cores": 2, "memory_bytes": 7 * GIB} for i in range(2)]
    snapshot = {"format": "crs-snapshot/1", "cluster": "short", "nodes": nodes, "guests": guests}
    cluster = Cluster.objects.create(name="short", source_kind="snapshot", source_config={"snapshot": snapshot})
    collect.apply(args=[cluster.pk])
    power = admin_client.get(api(cluster)).json()["power"]
    assert (power["power_on"], power["short"]) == ([], ["node01"])  # no standby node named yet
    assert (
        "Room is short on node01 (less than 2 standard guests), and no standby node"
        in admin_client.get(page(cluster)).content.decode()
    )

    answer = admin_client.patch(api(cluster, "-settings"), {"standby": ["node02"]}, content_type="application/json")
    assert answer.status_code == 200 and answer.json()["standby"] == ["node02"]
    power = admin_client.get(api(cluster)).json()["power"]
    assert (power["power_on"], power["power_off"], power["moves"]) == (["node02"], [], [])
    html = admin_client.get(page(cluster)).content.decode()
    assert "Room is short: power on <strong>node02</strong> first." in html
    assert "wake-on-LAN is out of scope" in html
