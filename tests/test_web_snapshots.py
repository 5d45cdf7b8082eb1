"""Snapshots in and out, plan previews, and a failing source shown on the page and in /healthz."""

import io
import json
import subprocess
import sys
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

import crs.snapshot
from dashboard.models import AuditEvent, Cluster, Migration, Policy
from dashboard.tasks import collect, execute

pytestmark = pytest.mark.django_db


def upload(data, name="lab.json"):
    return SimpleUploadedFile(
        name, json.dumps(data).encode() if not isinstance(data, bytes) else data, content_type="application/json"
    )


def test_download_is_the_snapshot_contract_with_the_cluster_settings(admin_client, collected):
    Policy.objects.filter(cluster=collected).update(threshold=0.2, mode="dynamic")
    response = admin_client.get(reverse("dashboard:export", args=[collected.pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith(f'attachment; filename="{collected.name}-')
    snap = crs.snapshot.parse(json.loads(response.content))
    assert snap.settings.threshold == pytest.approx(0.2) and snap.settings.mode == "dynamic"
    assert len(snap.guests) == len(collected.snapshot["guests"])


def test_download_before_the_first_collection_says_so(admin_client, cluster):
    response = admin_client.get(reverse("dashboard:export", args=[cluster.pk]))
    assert response.status_code == 404 and "not been collected" in response.json()["error"]


def test_downloaded_snapshot_plans_on_the_command_line(admin_client, collected, tmp_path):
    path = tmp_path / "snap.json"
    path.write_bytes(admin_client.get(reverse("dashboard:export", args=[collected.pk])).content)
    out = subprocess.run([sys.executable, "-m", "crs", "plan", str(path), "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["decision"] in {"migrate", "below-threshold", "below-margin", "no-candidate"}


def test_management_command_exports_and_names_unknown_clusters(collected, tmp_path):
    target = tmp_path / "out.json"
    call_command("export_snapshot", collected.name, "-o", str(target))
    assert crs.snapshot.load_file(target).cluster == collected.snapshot["cluster"]
    with pytest.raises(Exception, match="cluster: 'nope' does not exist; clusters: test"):
        call_command("export_snapshot", "nope", stdout=io.StringIO())


def test_import_creates_a_read_only_what_if_cluster_with_the_snapshot_settings(
    admin_client, collected, django_capture_on_commit_callbacks
):
    data = json.loads(admin_client.get(reverse("dashboard:export", args=[collected.pk])).content)
    # proxmox: no "fits" refusal, so the move below is refused for the read-only source alone
    data["settings"].update(
        preset="proxmox", threshold=0.05, target_imbalance=None, hold_duration=0, method="topsis", minimum_dwell=0
    )
    response = admin_client.post(reverse("dashboard:import"), {"name": "what-if", "snapshot": upload(data)})
    assert response.status_code == 302, response.content.decode()[-3000:]
    what_if = Cluster.objects.get(name="what-if")
    assert what_if.read_only and what_if.policy.threshold == pytest.approx(0.05) and what_if.policy.method == "topsis"
    assert what_if.policy.minimum_dwell == timedelta(0)  # a snapshot's seconds, stored as a duration
    assert AuditEvent.objects.filter(cluster=what_if, action="snapshot-imported").exists()
    page = admin_client.get(reverse("dashboard:cluster", args=[what_if.pk])).content.decode()
    assert "What-if cluster" in page and '"read_only": true' in page

    collect.apply(args=[what_if.pk])  # rounds run on the imported snapshot like on any cluster
    what_if.refresh_from_db()
    assert what_if.snapshot["guests"] == data["guests"] and what_if.source_error == ""
    migration = Migration.objects.create(
        cluster=what_if,
        leader=data["guests"][0]["sid"],
        guests=[data["guests"][0]["sid"]],
        source=data["guests"][0]["node"],
        target=next(n["name"] for n in data["nodes"] if n["name"] != data["guests"][0]["node"]),
        imbalance_before=0.5,
        imbalance_after=0.4,
        relative_gain=0.2,
        margin=0.1,
        method="bruteforce",
        state="approved",
    )
    execute.apply(args=[migration.pk])  # but nothing can be migrated on it
    migration.refresh_from_db()
    assert migration.state == "failed" and "read-only" in migration.reason


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"{nope", "snapshot: file (line 1 column 2): not JSON"),
        (
            {"format": "crs-snapshot/1", "nodes": [{"name": "a", "cpus": 0, "memory_bytes": 2**30}]},
            "snapshot: nodes[0].cpus: 0 is out of range; must be &gt;= 0.01 and &lt;= 1048576",
        ),
        (
            {
                "format": "crs-snapshot/1",
                "nodes": [{"name": "a", "cpus": 1, "memory_bytes": 2**30}],
                "guests": [{"sid": "vm:1", "node": "b"}],
            },
            "snapshot: guests[0].node: 'b' is not a node of this snapshot",
        ),
        (
            {
                "format": "crs-snapshot/1",
                "settings": {"imbalance_scale": "raw", "threshold": 1.5},
                "nodes": [{"name": "a", "cpus": 1, "memory_bytes": 2**30}],
            },
            "snapshot: settings: threshold must be between 0 and 1",
        ),
    ],
)
def test_bad_imports_are_refused_naming_the_field_and_store_nothing(admin_client, cluster, payload, message):
    before = list(Cluster.objects.values_list("name", flat=True))
    response = admin_client.post(reverse("dashboard:import"), {"name": "bad", "snapshot": upload(payload)})
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert list(Cluster.objects.values_list("name", flat=True)) == before


def test_import_name_must_be_new(admin_client, collected):
    data = crs.snapshot.to_dict(crs.snapshot.parse(collected.snapshot))
    response = admin_client.post(reverse("dashboard:import"), {"name": collected.name, "snapshot": upload(data)})
    assert response.status_code == 400 and "already exists" in response.content.decode()


def test_only_cluster_admins_import(client, viewer, collected):
    client.force_login(viewer)
    data = crs.snapshot.to_dict(crs.snapshot.parse(collected.snapshot))
    assert client.post(reverse("dashboard:import"), {"name": "x", "snapshot": upload(data)}).status_code == 403


def test_plan_preview_shows_a_sequence_and_its_contract(admin_client, collected):
    Policy.objects.filter(cluster=collected).update(threshold=0.01, margin=0.01, mode="dynamic")
    url = reverse("dashboard:plan", args=[collected.pk])
    plan = admin_client.get(url, {"steps": 3, "format": "json"}).json()
    assert plan["format"] == "crs-plan/1" and 1 <= len(plan["moves"]) <= 3
    page = admin_client.get(url, {"steps": 3}).content.decode()
    assert plan["moves"][0]["leader"] in page and "Plan for test" in page
    first = plan["moves"][0]  # fractions in the contract, percent on the page
    assert f"{first['imbalance_after'] * 100:.1f} %</td><td>{first['relative_gain'] * 100:.1f} %" in page
    response = admin_client.get(url, {"steps": 99})
    assert response.status_code == 400 and "steps must be a whole number from 1 to 20" in response.content.decode()


def test_failing_source_shows_on_the_page_and_in_healthz_and_keeps_history(admin_client, collected):
    kept = collected.snapshot
    Cluster.objects.filter(pk=collected.pk).update(source_config={"nodes": "twelve"})
    collect.apply(args=[collected.pk])
    cluster = Cluster.objects.get(pk=collected.pk)
    assert cluster.snapshot == kept and "simulator.nodes" in cluster.source_error
    health = admin_client.get("/healthz").json()
    assert health["sources"]["test"].startswith("error: simulator.nodes")
    admin_client.logout()  # monitoring sees that it fails, not the details
    assert admin_client.get("/healthz").json()["sources"]["test"] == "error"
    admin_client.force_login(User.objects.get(username="admin"))
    page = admin_client.get(reverse("dashboard:cluster", args=[cluster.pk])).content.decode()
    assert "Source unreachable or refused" in page
    assert admin_client.get(reverse("api:cluster-state", args=[cluster.pk])).json()["source"]["error"]

    Cluster.objects.filter(pk=collected.pk).update(source_config={"migration_mib_s": 1e9, "nodes": 6, "hot_nodes": 2})
    collect.apply(args=[collected.pk])
    assert Cluster.objects.get(pk=collected.pk).source_error == ""
    assert admin_client.get("/healthz").json()["sources"]["test"] == "ok"


def test_proxmox_clusters_take_connection_defaults_from_the_environment(settings, db):
    settings.CRS_PVE_DEFAULTS = {"host": "pve.example", "token": "root@pam!crs=secret"}
    cluster = Cluster.objects.create(name="pve", source_kind="proxmox", source_config={"verify_ssl": False})
    with Cluster.objects.opened_source(cluster.pk) as (_, source):
        assert source.config.host == "pve.example" and source.config.verify_ssl is False


@pytest.mark.parametrize(
    ("kind", "config", "message"),
    [
        ("simulator", {"nodes": 1}, "simulator.nodes: 1 is not a whole number 2..500"),
        ("simulator", {"colour": "red"}, "simulator.colour: unknown key"),
        ("proxmox", {"host": "pve.example"}, "proxmox.user: missing"),
        ("snapshot", {}, "give exactly one of path"),
    ],
)
def test_cluster_source_config_is_checked_before_it_is_stored(db, kind, config, message):
    from django.core.exceptions import ValidationError

    cluster = Cluster(name="new", source_kind=kind, source_config=config)
    with pytest.raises(ValidationError) as info:
        cluster.full_clean()
    assert message in " ".join(info.value.message_dict["source_config"])
    assert not Cluster.objects.filter(name="new").exists()
