"""Change windows, blackouts and Proxmox's own balancer holding automation: rounds, API, audit, collect."""

import copy
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from conftest import run_rounds, set_policy

from dashboard.automation import held_reason
from dashboard.models import AuditEvent, Blackout, ChangeWindow, Cluster, Migration
from dashboard.tasks import collect
from harness.fakepve import TOKEN

pytestmark = pytest.mark.django_db
BERLIN = ZoneInfo("Europe/Berlin")


def automatic(cluster):
    set_policy(cluster, hold_duration=0, automation="automatic", time_zone="Europe/Berlin")


def window_around_now(cluster, hours: int):
    """Every day, from an hour before now to `hours` after an hour before now (Berlin wall clock)."""
    local = datetime.now(BERLIN)
    start = (local - timedelta(hours=1)).time().replace(second=0, microsecond=0)
    end = (local - timedelta(hours=1) + timedelta(hours=hours)).time().replace(second=0, microsecond=0)
    return ChangeWindow.objects.create(cluster=cluster, days=list(range(7)), start=start, end=end)


def test_outside_every_window_the_plan_waits_for_a_person(cluster, django_capture_on_commit_callbacks):
    automatic(cluster)
    window_around_now(cluster, 1)  # ended now, opens again tomorrow an hour earlier
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    plan = list(Migration.objects.filter(cluster=cluster))
    assert plan and all(m.state == "suggested" and not m.automatic for m in plan)
    held = AuditEvent.objects.get(action="automation-held")
    assert held.details["plan"] == plan[0].plan
    assert held.details["reason"].startswith("outside the change windows until ")
    assert "(Europe/Berlin)" in held.details["reason"]


def test_inside_a_window_automation_approves_its_plan(cluster, django_capture_on_commit_callbacks):
    automatic(cluster)
    window_around_now(cluster, 3)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    assert Migration.objects.filter(cluster=cluster, automatic=True).exists()
    assert not AuditEvent.objects.filter(action="automation-held").exists()


def test_a_blackout_holds_automation_inside_a_window(cluster, django_capture_on_commit_callbacks):
    automatic(cluster)
    window_around_now(cluster, 3)
    now = datetime.now(BERLIN)
    Blackout.objects.create(
        cluster=cluster, label="backups", starts_at=now - timedelta(minutes=5), ends_at=now + timedelta(hours=1)
    )
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    assert not Migration.objects.filter(cluster=cluster).exclude(state="suggested").exists()
    assert AuditEvent.objects.get(action="automation-held").details["reason"].startswith("blackout: backups until ")


def test_manual_automation_is_never_held_nor_audited_as_held(cluster, django_capture_on_commit_callbacks):
    set_policy(cluster, hold_duration=0)
    window_around_now(cluster, 1)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    assert Migration.objects.filter(cluster=cluster, state="suggested").exists()
    assert not AuditEvent.objects.filter(action="automation-held").exists()


def proxmox_cluster(pve):
    config = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file, "slow_reads_s": 0}
    return Cluster.objects.create(name="pve", source_kind="proxmox", source_config=config)


def crowd(pve):
    """Three more copies of a recorded VM on node1: a cluster with a move worth making."""
    for vmid in (201, 202, 203):
        vm = copy.deepcopy(pve.entry("qemu/100"))
        vm.update(id=f"qemu/{vmid}", vmid=vmid, name=f"extra{vmid}", node="node1")
        pve.resources.append(vm)


def test_collect_reads_proxmox_crs_options_in_percent(pve):
    pve.options["crs"] = "ha=dynamic,ha-auto-rebalance=1,ha-auto-rebalance-threshold=25,ha-auto-rebalance-margin=15"
    cluster = proxmox_cluster(pve)
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    stored = cluster.proxmox_balancer
    assert (stored["mode"], stored["threshold"], stored["margin"], stored["unit"]) == ("dynamic", 0.25, 0.15, "percent")
    assert ("GET", "cluster/options", {}) in pve.requests
    assert held_reason(cluster).startswith("Proxmox's own automatic rebalancing (ha-auto-rebalance) is on")


def test_proxmox_auto_rebalance_holds_automation_here(pve, django_capture_on_commit_callbacks):
    pve.options["crs"] = "ha=static,ha-auto-rebalance=1"
    crowd(pve)
    cluster = proxmox_cluster(pve)
    set_policy(cluster, hold_duration=0, automation="automatic", threshold=0.0, target_imbalance=0.0, margin=0.0)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    plan = list(Migration.objects.filter(cluster=cluster))
    assert plan and all(m.state == "suggested" for m in plan)  # shown, not run
    assert "Proxmox's own automatic rebalancing" in AuditEvent.objects.get(action="automation-held").details["reason"]
    assert not any(method == "POST" for method, _, _ in pve.requests)  # nothing migrated here
    pve.options["crs"] = "ha=static"  # the admin turned Proxmox's off: ours runs again
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    assert held_reason(cluster) == ""


def test_a_pve_without_options_or_without_crs_runs_no_balancer_of_its_own(pve):
    cluster = proxmox_cluster(pve)
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    assert cluster.proxmox_balancer["mode"] == "basic" and not cluster.proxmox_balancer["auto_rebalance"]
    assert held_reason(cluster) == ""
    pve.options = None  # 501, as an old PVE answers
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    assert cluster.source_error == "" and cluster.proxmox_balancer["unit"] == "default"


# -- the API ---------------------------------------------------------------------------------------


def test_windows_and_blackouts_through_the_api_are_audited(admin_client, cluster):
    created = admin_client.post(
        "/api/v1/change-windows/",
        {"cluster": cluster.pk, "days": [4, 4, 0], "start": "22:00", "end": "06:00"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["days"] == [0, 4]
    blackout = admin_client.post(
        "/api/v1/blackouts/",
        {
            "cluster": cluster.pk,
            "label": "backups",
            "starts_at": "2026-11-29T01:00+01:00",
            "ends_at": "2026-11-29T04:00+01:00",
        },
        content_type="application/json",
    )
    assert blackout.status_code == 201, blackout.content
    assert admin_client.delete(f"/api/v1/change-windows/{created.json()['id']}/").status_code == 204
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", "details"))
    assert actions == [
        ("window-added", {"days": [0, 4], "start": "22:00", "end": "06:00"}),
        (
            "blackout-added",
            {"label": "backups", "starts_at": "2026-11-29T00:00:00+00:00", "ends_at": "2026-11-29T03:00:00+00:00"},
        ),
        ("window-removed", {"days": [0, 4], "start": "22:00", "end": "06:00"}),
    ]


@pytest.mark.parametrize(
    "path, body, field, words",
    [
        ("/api/v1/change-windows/", {"days": [7], "start": "22:00", "end": "06:00"}, "days", "0 (Monday) … 6 (Sunday)"),
        ("/api/v1/change-windows/", {"days": [], "start": "22:00", "end": "06:00"}, "days", "non-empty list"),
        (
            "/api/v1/change-windows/",
            {"days": [1], "start": "22:00", "end": "22:00"},
            "end",
            "end must differ from start",
        ),
        ("/api/v1/change-windows/", {"days": [1], "start": "25:00", "end": "06:00"}, "start", "Time has wrong format"),
        (
            "/api/v1/blackouts/",
            {"label": "x", "starts_at": "2026-11-29T04:00Z", "ends_at": "2026-11-29T01:00Z"},
            "ends_at",
            "ends_at must be after starts_at",
        ),
    ],
)
def test_bad_windows_are_refused_naming_the_field(admin_client, cluster, path, body, field, words):
    answer = admin_client.post(path, {"cluster": cluster.pk, **body}, content_type="application/json")
    assert answer.status_code == 400
    assert words in " ".join(answer.json()[field])
    assert not AuditEvent.objects.exists()


def test_only_those_who_change_settings_edit_windows(client, operator, cluster):
    client.force_login(operator)
    body = {"cluster": cluster.pk, "days": [1], "start": "22:00", "end": "06:00"}
    assert client.post("/api/v1/change-windows/", body, content_type="application/json").status_code == 403
    assert client.get("/api/v1/change-windows/").status_code == 200


def test_automation_status_says_paused_until_when_and_why(admin_client, cluster):
    set_policy(cluster, automation="automatic", time_zone="Europe/Berlin")
    window_around_now(cluster, 1)
    status = admin_client.get(f"/api/v1/clusters/{cluster.pk}/automation/").json()
    assert status["gate"]["open"] is False and status["gate"]["reason"] == "window"
    opens = datetime.fromisoformat(status["gate"]["until"])
    assert timedelta(hours=22) < opens - datetime.now(BERLIN) <= timedelta(hours=23)
    assert status["windows"][0]["next_start"] == status["gate"]["until"]
    assert status["time_zone"] == "Europe/Berlin" and status["proxmox_balancer"] is None


def test_time_zone_setting_refuses_unknown_zones(admin_client, cluster):
    answer = admin_client.patch(
        f"/api/v1/clusters/{cluster.pk}/settings/", {"time_zone": "Mars/Olympus"}, content_type="application/json"
    )
    assert answer.status_code == 400
    assert answer.json()["time_zone"] == ["time zone must be an IANA zone name, e.g. Europe/Berlin or UTC"]


# -- the page --------------------------------------------------------------------------------------


def test_page_says_automatic_moves_are_paused_until_the_window_opens(admin_client, cluster):
    set_policy(cluster, automation="automatic", time_zone="Europe/Berlin")
    window = window_around_now(cluster, 1)
    page = admin_client.get(f"/clusters/{cluster.pk}/").content.decode()
    opens = (datetime.now(BERLIN) - timedelta(hours=1) + timedelta(days=1)).strftime(
        "%a"
    ) + f" {window.start:%H:%M} Europe/Berlin"
    assert "Automatic moves paused until" in page and opens in page and "(window)" in page
    assert "Proxmox's own balancer" not in page  # a simulator has none


def test_windows_and_blackouts_are_added_and_removed_on_the_page(admin_client, cluster):
    set_policy(cluster, time_zone="Europe/Berlin")
    answer = admin_client.post(
        f"/clusters/{cluster.pk}/windows", {"days": ["4", "5"], "start": "22:00", "end": "06:00"}
    )
    assert answer.status_code == 302
    window = ChangeWindow.objects.get(cluster=cluster)
    assert (window.days, f"{window.start:%H:%M}", f"{window.end:%H:%M}") == ([4, 5], "22:00", "06:00")
    # a blackout typed in the cluster's zone is stored as that moment (a week ahead: the page
    # lists the blackouts still to come, so a fixed date fails the test once it has passed)
    day = (datetime.now(BERLIN) + timedelta(days=7)).date()
    admin_client.post(
        f"/clusters/{cluster.pk}/blackouts",
        {"label": "backups", "starts_at": f"{day}T01:00", "ends_at": f"{day}T04:00"},
    )
    blackout = Blackout.objects.get(cluster=cluster)
    assert blackout.starts_at == datetime(day.year, day.month, day.day, 1, 0, tzinfo=BERLIN)
    page = admin_client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert "Fri, Sat" in page
    assert "22:00–06:00 (next day)" in page
    assert f"{day} 01:00 – {day} 04:00" in page
    refused = admin_client.post(f"/clusters/{cluster.pk}/windows", {"start": "22:00", "end": "06:00"}, follow=True)
    assert "Not added: days: tick at least one day" in refused.content.decode()
    admin_client.post(f"/clusters/{cluster.pk}/windows/{window.pk}/remove")
    assert not ChangeWindow.objects.exists()
    assert list(AuditEvent.objects.order_by("pk").values_list("action", flat=True)) == [
        "window-added",
        "blackout-added",
        "window-removed",
    ]


def test_operators_see_the_windows_but_cannot_change_them(client, operator, cluster):
    ChangeWindow.objects.create(cluster=cluster, days=[0], start="22:00", end="06:00")
    client.force_login(operator)
    page = client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert "Mon" in page and 'id="window-form"' not in page
    assert (
        client.post(f"/clusters/{cluster.pk}/windows", {"days": ["1"], "start": "1:00", "end": "2:00"}).status_code
        == 403
    )


def test_page_shows_proxmox_balancer_beside_ours_and_says_it_moves_nothing_by_itself(admin_client, pve):
    pve.options["crs"] = "ha=dynamic,ha-auto-rebalance=1,ha-auto-rebalance-threshold=0.25"
    cluster = proxmox_cluster(pve)
    collect.apply(args=[cluster.pk])
    page = admin_client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert "Proxmox's own automatic rebalancing is on" in page
    # threshold: Proxmox's (a fraction there) and ours, as fractions: units.js writes "25 %" and "30 %"
    assert '<td><data class="pct" value="0.25" data-digits="0"></data></td><td><data class="pct" value="0.3"' in page
    assert "as fractions" in page
