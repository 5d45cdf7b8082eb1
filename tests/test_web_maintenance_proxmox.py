"""Maintenance of a Proxmox cluster (the fake PVE over HTTPS): the product shows the command,
reads the state back from the HA status, and plans only the guests Proxmox leaves in place."""

import pytest
from conftest import run_rounds

from dashboard.models import AuditEvent, Cluster, Migration
from dashboard.tasks import collect
from harness.fakepve import TOKEN


@pytest.fixture
def pve(pve):
    """conftest's fake PVE, where node2 holds the HA guest vm:104 (Proxmox's to move) beside the
    non-HA vm:100 (the product's)."""
    pve.entry("qemu/104")["node"] = "node2"
    pve.services["vm:104"]["node"] = "node2"
    return pve


@pytest.fixture
def proxmox(db, pve):
    config = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file, "slow_reads_s": 0}
    cluster = Cluster.objects.create(name="pve", source_kind="proxmox", source_config=config)
    collect.apply(args=[cluster.pk])
    return cluster


@pytest.mark.django_db
def test_proxmox_maintenance_shows_the_command_and_plans_only_the_non_ha_guests(
    admin_client, proxmox, pve, django_capture_on_commit_callbacks
):
    url = f"/api/v1/clusters/{proxmox.pk}/maintenance/"
    answer = admin_client.post(url + "enter/", {"node": "node2"}, content_type="application/json")
    assert answer.status_code == 409
    assert "ha-manager crm-command node-maintenance enable node2" in answer.json()["detail"]
    assert not proxmox.maintenances.exists() and not AuditEvent.objects.filter(action="maintenance-entered").exists()

    pve.lrm_mode["node2"] = "maintenance"  # the admin ran the command; the LRM reports maintenance mode
    run_rounds(proxmox, 1, django_capture_on_commit_callbacks)
    assert proxmox.maintenances.get(left_at=None).node == "node2"
    moves = list(Migration.objects.filter(kind="evacuation"))
    assert [(m.leader, m.source, m.priority) for m in moves] == [("vm:100", "node2", 1)]  # vm:104 is Proxmox's
    node2 = next(n for n in admin_client.get(url).json() if n["node"] == "node2")
    assert node2["maintenance"] and node2["left_to_proxmox"] == 1
    assert node2["command"] == "ha-manager crm-command node-maintenance disable node2"


@pytest.mark.django_db
def test_proxmox_s_own_moves_are_listed_one_by_one_with_the_rule(
    admin_client, proxmox, pve, django_capture_on_commit_callbacks
):
    # vm:104 (HA) sits on node2, but its rule db-prefers-node3 prefers node3: Proxmox moves it itself
    url = f"/api/v1/clusters/{proxmox.pk}/proxmox-moves/"
    run_rounds(proxmox, 1, django_capture_on_commit_callbacks)
    fix = {
        "kind": "rule-fix",
        "guest": "vm:104",
        "source": "node2",
        "target": "node3",
        "rules": ["db-prefers-node3"],
        "why": "node affinity rule 'db-prefers-node3' prefers node3 for vm:104 over node2",
    }
    assert admin_client.get(url).json() == {"proxmox": True, "moves": [fix]}
    assert proxmox.rounds.latest("at").explanation["proxmox_fixes"] == [fix]
    assert not Migration.objects.filter(leader="vm:104").exists()  # the product does not fight over it
    page = admin_client.get(f"/clusters/{proxmox.pk}/").content.decode()
    assert 'id="proxmox-moves"' in page and "Moves Proxmox's HA manager makes itself" in page

    pve.lrm_mode["node2"] = "maintenance"  # now it is evacuated instead, still by Proxmox
    run_rounds(proxmox, 1, django_capture_on_commit_callbacks)
    [evacuation] = admin_client.get(url).json()["moves"]
    assert (evacuation["kind"], evacuation["guest"], evacuation["source"], evacuation["target"]) == (
        "evacuation",
        "vm:104",
        "node2",
        "node3",
    )
    assert evacuation["why"].startswith("node2 is in maintenance") and evacuation["rules"] == []

    pve.entry("qemu/104").update(hastate="migrate", lock="migrate")  # Proxmox's manager has started it
    pve.services["vm:104"] |= {"state": "migrate", "target": "node3"}
    run_rounds(proxmox, 1, django_capture_on_commit_callbacks)
    [running] = admin_client.get(url).json()["moves"]
    assert (running["kind"], running["guest"], running["source"], running["target"]) == (
        "running",
        "vm:104",
        "node2",
        "node3",
    )


@pytest.mark.django_db
def test_other_clusters_have_no_proxmox_moves(admin_client, collected):
    answer = admin_client.get(f"/api/v1/clusters/{collected.pk}/proxmox-moves/")
    assert answer.status_code == 200 and answer.json() == {"proxmox": False, "moves": []}
    assert 'id="proxmox-moves"' not in admin_client.get(f"/clusters/{collected.pk}/").content.decode()
