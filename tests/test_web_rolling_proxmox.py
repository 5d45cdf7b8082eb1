"""Rolling maintenance of a Proxmox cluster (the fake PVE over HTTPS): maintenance is Proxmox's
command-line's, so the queue shows the command and follows the node's state; a node that
reboots while waiting for the admin moves on by itself."""

import os
import signal

import pytest
from conftest import run_rounds, service_or_skip, shared_database_url, single_worker, wait_until
from test_web_maintenance_proxmox import proxmox, pve  # noqa: F401 (fixtures)
from test_web_rolling import post, steps, ticker, url

from dashboard.models import AuditEvent, Cluster, Migration, RollingNode
from dashboard.tasks import collect
from harness.fakepve import TOKEN


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


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers
def test_a_node_seen_rebooted_moves_on_without_the_admin_s_word(admin_client, pve, redis_server):  # noqa: F811
    service_or_skip("CRS_TEST_DATABASE_URL")
    config = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file, "slow_reads_s": 0}
    cluster = Cluster.objects.create(name="pve-rolling", source_kind="proxmox", source_config=config)
    collect.apply(args=[cluster.pk])
    assert post(admin_client, cluster, "start", {"nodes": ["node2"]}).status_code == 201
    tick = ticker(cluster, redis_server.url)
    process = single_worker(shared_database_url(), redis_server.url, "rolling-proxmox")

    def at(step):
        def reached():
            tick()
            return steps(cluster)["node2"] == step

        reached.__doc__ = f"node2 is {step}"
        return reached

    try:
        wait_until(at("draining"), 60)
        pve.lrm_mode["node2"] = "maintenance"  # the admin ran the command the page shows
        pve.entry("qemu/104")["node"] = "node3"  # Proxmox's HA manager moves its own guest
        pve.services["vm:104"]["node"] = "node3"
        wait_until(at("waiting-admin"), 120)  # the product moved vm:100
        assert RollingNode.objects.get(node="node2").uptime_s == 874373  # as the node reported it then
        [queued] = admin_client.get(url(cluster)).json()["queue"]
        assert queued["label"] == "waiting for admin (or its reboot: seen by its uptime)"
        page = admin_client.get(f"/clusters/{cluster.pk}/rolling/").content.decode()
        assert "Node is back" in page and "smaller uptime" in page  # the admin's button stays

        pve.power_off("node2")  # the admin reboots it
        rounds = cluster.rounds.count()

        def rounds_while_down():
            """three rounds with node2 down"""
            tick()
            return cluster.rounds.count() >= rounds + 3

        wait_until(rounds_while_down, 60)
        assert steps(cluster)["node2"] == "waiting-admin"  # down is not back
        pve.boot("node2", uptime=42)
        wait_until(at("returning"), 60)
        [queued] = admin_client.get(url(cluster)).json()["queue"]
        assert queued["command"] == "ha-manager crm-command node-maintenance disable node2"
        assert post(admin_client, cluster, "node-back", {"node": "node2"}).status_code == 200  # a late click: harmless

        pve.lrm_mode["node2"] = "active"  # the admin ran the command: out of maintenance
        pve.entry("qemu/104")["node"] = "node2"  # Proxmox brings its own guest back
        pve.services["vm:104"]["node"] = "node2"
        wait_until(at("done"), 120)  # the product brought vm:100 back
        wait_until(lambda: tick() or cluster.rollings.get().state == "done", 60)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    assert pve.entry("qemu/100")["node"] == "node2"
    moves = Migration.objects.filter(cluster=cluster, kind__in=("evacuation", "failback")).order_by("pk")
    assert [(m.kind, m.leader, m.state) for m in moves] == [
        ("evacuation", "vm:100", "done"),
        ("failback", "vm:100", "done"),
    ]
    trail = [
        (e.action, e.actor_name, e.details.get("step"), e.details.get("reason"))
        for e in AuditEvent.objects.filter(action__startswith="rolling-").order_by("pk")
    ]
    assert trail == [
        ("rolling-started", "admin", None, None),
        ("rolling-step", "", "draining", None),
        ("rolling-step", "", "waiting-admin", None),
        ("rolling-step", "", "returning", "node rebooted: uptime 42 s"),
        ("rolling-step", "", "done", None),
        ("rolling-done", "", None, None),
    ]
