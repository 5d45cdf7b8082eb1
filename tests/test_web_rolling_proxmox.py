"""Rolling maintenance of a Proxmox cluster (the fake PVE over HTTPS): maintenance is Proxmox's
command-line's, so the queue shows the command and follows the node's state."""

import pytest
from conftest import run_rounds
from test_web_maintenance_proxmox import proxmox, pve  # noqa: F401 (fixtures)

from dashboard.models import AuditEvent, RollingNode


@pytest.mark.django_db
def test_the_queue_shows_the_command_and_follows_the_nodes_state(
    admin_client,
    proxmox,  # noqa: F811
    pve,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    url = f"/api/v1/clusters/{proxmox.pk}/rolling/"
    with django_capture_on_commit_callbacks(execute=False):
        answer = admin_client.post(url + "start/", {"nodes": ["node2"]}, content_type="application/json")
    assert answer.status_code == 201
    run_rounds(proxmox, 1, django_capture_on_commit_callbacks)  # the round moves the queue on
    first = admin_client.get(url).json()["queue"][0]
    assert (first["node"], first["step"]) == ("node2", "draining")
    assert first["command"] == "ha-manager crm-command node-maintenance enable node2"
    assert not proxmox.maintenances.exists()  # nothing entered from here: the admin runs the command
    assert "node-maintenance enable node2" in admin_client.get(f"/clusters/{proxmox.pk}/rolling/").content.decode()

    pve.lrm_mode["node2"] = "maintenance"  # the admin ran it; the LRM reports maintenance mode
    run_rounds(proxmox, 1, django_capture_on_commit_callbacks)
    assert proxmox.maintenances.get(left_at=None).node == "node2"  # the round saw it
    assert RollingNode.objects.get(node="node2").step == "draining"  # guests still on it
    assert AuditEvent.objects.filter(action="rolling-step", details__step="draining").count() == 1
