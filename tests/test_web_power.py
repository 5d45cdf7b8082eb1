"""Power down on the web side, with a real worker: a suggested node is emptied through its
maintenance and the normal migrations, then the fake Proxmox receives the shutdown and the node
is standby in the next snapshot (a simulated cluster stops at "power it off by hand" until the
admin marks it standby); every refusal names its reason; the hourly capacity counts run in a
task of their own, so a count stuck on its table never holds the next round up."""

from html import escape

import psycopg
import pytest
from conftest import keep_collecting, race, service_or_skip, shared_database_url, wait_until
from test_web_capacity import UNDERUSED, api
from test_web_tasks import worker  # noqa: F401 (a fixture)

from dashboard.models import AuditEvent, CapacitySample, Cluster, Migration, PowerDown
from dashboard.tasks import collect
from harness.fakepve import TOKEN

GIB = 2**30


def power_down(client, cluster, node, what=""):
    return client.post(api(cluster, "")[: -len("capacity/")] + f"power-down/{what}", {"node": node}, "application/json")


def trail(cluster, node):
    events = AuditEvent.objects.filter(cluster=cluster, action__startswith="power-down").order_by("pk")
    events = events | AuditEvent.objects.filter(cluster=cluster, action="maintenance-entered")
    return [(e.action, e.actor_name) for e in events.order_by("pk") if e.details.get("node") == node]


@pytest.mark.django_db(transaction=True)
def test_proxmox_node_is_emptied_shut_down_through_the_api_and_standby_in_the_next_snapshot(
    admin_client,
    pve,
    worker,  # noqa: F811
):
    config = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file, "slow_reads_s": 0}
    cluster = Cluster.objects.create(name="pve", source_kind="proxmox", source_config=config)
    collect.apply(args=[cluster.pk])
    small = {"medium": {"cores": 1, "memory_bytes": GIB}}  # the standard guest the fake's small nodes have room for
    assert admin_client.patch(api(cluster, "-settings"), small, content_type="application/json").status_code == 200
    assert "node2" in admin_client.get(api(cluster)).json()["power"]["power_off"]

    answer = power_down(admin_client, cluster, "node2")
    assert answer.status_code == 200, answer.json()
    [down] = answer.json()["power_downs"]
    assert (down["node"], down["state"]) == ("node2", "draining")
    assert down["command"] == "ha-manager crm-command node-maintenance enable node2"  # Proxmox's CLI only
    page = admin_client.get(f"/clusters/{cluster.pk}/capacity/").content.decode()
    assert "ha-manager crm-command node-maintenance enable node2" in page
    assert power_down(admin_client, cluster, "node2").json()["power_downs"] == [down]  # safe to repeat

    pve.lrm_mode["node2"] = "maintenance"  # the admin ran it
    tick = keep_collecting(cluster)

    def standby():
        """the power-down reached standby"""
        tick()
        return PowerDown.objects.filter(state="standby").first()

    wait_until(standby, timeout=60)
    assert ("POST", "nodes/node2/status", {"command": "shutdown"}) in pve.requests
    [move] = Migration.objects.filter(cluster=cluster)
    assert (move.leader, move.source, move.kind, move.state) == ("vm:100", "node2", "consolidation", "done")
    assert move.automatic  # approved at once: the admin's "power down" was the decision

    collect.apply(args=[cluster.pk])  # the next snapshot: node2 is down, on purpose
    cluster.refresh_from_db()
    node2 = next(n for n in cluster.snapshot["nodes"] if n["name"] == "node2")
    assert node2["standby"] is True and node2["online"] is False
    assert not any(g["node"] == "node2" for g in cluster.snapshot["guests"] if g["state"] == "started")
    assert admin_client.get(api(cluster, "-settings")).json()["standby"] == ["node2"]

    def round_after():
        """a round on the standby snapshot"""
        tick()
        latest = cluster.rounds.order_by("-at").first()
        return latest if latest and latest.at > cluster.collected_at else None

    assert "node2" not in wait_until(round_after).node_usage  # not counted in the imbalance
    assert trail(cluster, "node2") == [
        ("power-down-started", "admin"),
        ("maintenance-entered", ""),  # seen at the source
        ("power-down-shutdown", ""),
    ]
    page = admin_client.get(f"/clusters/{cluster.pk}/capacity/").content.decode()
    assert 'id="power-down-node2" data-state="standby"' in page
    answer = power_down(admin_client, cluster, "node2")
    assert answer.status_code == 409 and answer.json()["detail"] == "node2 is standby already"


# A drain of several moves through a worker, a minute of rounds: in the `servers` run, beside the
# main run (scripts/testsuite.py), whose critical path it was.
@pytest.mark.servers
@pytest.mark.django_db(transaction=True)
def test_a_simulated_node_is_emptied_then_waits_to_be_powered_off_by_hand(admin_client, worker):  # noqa: F811
    cluster = Cluster.objects.create(name="quiet", source_kind="simulator", source_config=UNDERUSED)
    collect.apply(args=[cluster.pk])
    node = admin_client.get(api(cluster)).json()["power"]["power_off"][0]
    held = {g["sid"] for g in Cluster.objects.get(pk=cluster.pk).snapshot["guests"] if g["node"] == node}
    assert held

    answer = admin_client.post(f"/clusters/{cluster.pk}/capacity/power/down", {"node": node})
    assert answer.status_code == 302
    tick = keep_collecting(cluster)

    def emptied():
        """the power-down is emptied"""
        tick()
        return PowerDown.objects.filter(state="emptied").first()

    down = wait_until(emptied, timeout=240)  # a drain of several moves: generous on a busy CI machine
    assert "power it off by hand" in down.note
    moves = Migration.objects.filter(cluster=cluster, kind="consolidation")  # ranked below balancing
    # the guests it held, and any the simulated cluster started there before it entered maintenance
    assert held <= {m.leader for m in moves} and {(m.source, m.state) for m in moves} == {(node, "done")}
    assert not Migration.objects.filter(cluster=cluster, target=node).exists()  # nothing moved onto it
    page = admin_client.get(f"/clusters/{cluster.pk}/capacity/").content.decode()
    assert "power it off by hand, then mark it standby" in page and f"Mark {node} standby" in page
    before = Cluster.objects.get(pk=cluster.pk).snapshot
    assert not next(n for n in before["nodes"] if n["name"] == node).get("standby")  # absent = false

    answer = admin_client.post(f"/clusters/{cluster.pk}/capacity/power/standby", {"node": node})
    assert answer.status_code == 302
    snapshot = Cluster.objects.get(pk=cluster.pk).snapshot  # the stored one says it at once
    assert next(n for n in snapshot["nodes"] if n["name"] == node)["standby"] is True
    assert admin_client.get(api(cluster, "-settings")).json()["standby"] == [node]
    assert power_down(admin_client, cluster, node, "standby/").status_code == 200  # safe to repeat
    guests_page = admin_client.get(f"/clusters/{cluster.pk}/guests/").content.decode()
    assert f'<strong>{node}</strong> <span class="tag">standby</span>' in guests_page
    found = admin_client.get("/api/v1/audit/", {"action": "power-down-standby"}).json()["results"]
    assert [e["details"]["node"] for e in found] == [node]
    assert trail(cluster, node) == [
        ("power-down-started", "admin"),
        ("maintenance-entered", "admin"),
        ("power-down-emptied", ""),
        ("power-down-standby", "admin"),
    ]


@pytest.mark.django_db
def test_refusals_name_the_reason(admin_client, operator, client, collected):
    underused = Cluster.objects.create(name="quiet", source_kind="simulator", source_config=UNDERUSED)
    collect.apply(args=[underused.pk])
    suggested = admin_client.get(api(underused)).json()["power"]["power_off"]

    answer = power_down(admin_client, collected, "node05")  # the test cluster's nodes are busy
    assert answer.status_code == 409
    assert answer.json()["detail"] == (
        "node05 is not a node the power suggestion can empty while every other keeps room for 2 standard guests "
        "(it suggests none now)"
    )
    spare = next(n for n in ("node01", "node02") if n not in suggested)
    detail = power_down(admin_client, underused, spare).json()["detail"]
    assert detail.endswith(f"(it suggests {', '.join(suggested)})")

    answer = power_down(admin_client, collected, "node99")
    assert answer.status_code == 400 and answer.json()["node"][0].startswith("node must be one of node01, node02")
    assert power_down(admin_client, collected, "").status_code == 400

    capacity_page = f"/clusters/{underused.pk}/capacity/"
    before = admin_client.get(capacity_page).content.decode()
    assert f'<button type="submit">Power down {suggested[0]}</button>' in before and "power-refused" not in before
    # N+1: a strict rule keeps a guest of the suggested node on it or one other node; emptied, that
    # node's loss would leave the guest nowhere to go
    node, other = suggested[0], next(n for n in suggested[1:])
    guest = next(g["sid"] for g in Cluster.objects.get(pk=underused.pk).snapshot["guests"] if g["node"] == node)
    rule = {
        "cluster": underused.pk,
        "rule": "two-homes",
        "type": "node-affinity",
        "resources": [guest],
        "nodes": [{"node": node}, {"node": other}],
        "strict": True,
    }
    assert admin_client.post("/api/v1/rules/", rule, content_type="application/json").status_code == 201
    answer = power_down(admin_client, underused, node)
    assert answer.status_code == 409
    assert answer.json()["detail"].startswith(f"powering {node} down breaks N+1: with {node} in maintenance, N+1 fails")
    # the page does not offer a click sure to be refused: its button is off, with the same reason
    page = admin_client.get(capacity_page).content.decode()
    assert f'disabled aria-describedby="power-refused">Power down {node}</button>' in page
    assert f"<li>{escape(answer.json()['detail'])}</li>" in page

    assert admin_client.patch(api(underused, "-settings"), {"standby": [other]}, content_type="application/json")
    answer = power_down(admin_client, underused, other)
    assert answer.status_code == 409 and answer.json()["detail"] == f"{other} is standby already"
    answer = power_down(admin_client, underused, node, "standby/")
    assert answer.status_code == 400 and answer.json()["node"] == [
        "node must be a node being powered down (power-downs: none)"
    ]

    # the page says the same, never a 500; a role without change_cluster is refused
    page = admin_client.post(f"/clusters/{underused.pk}/capacity/power/down", {"node": other})
    assert page.status_code == 409 and f"{other} is standby already" in page.content.decode()
    assert admin_client.post(f"/clusters/{underused.pk}/capacity/power/up", {"node": other}).status_code == 400
    client.force_login(operator)
    assert power_down(client, underused, node).status_code == 403
    assert client.post(f"/clusters/{underused.pk}/capacity/power/down", {"node": node}).status_code == 403
    assert not PowerDown.objects.exists() and not underused.maintenances.exists()
    assert not AuditEvent.objects.filter(action__startswith="power-down").exists()


@pytest.mark.django_db(transaction=True)
def test_a_capacity_count_stuck_on_its_table_does_not_hold_the_next_round_up(worker):  # noqa: F811
    """The round queues the count and is done: with the figures' table locked (a slow count, as
    the N+1 counts are on a big cluster), the next rounds still run; the count lands once it is free."""
    service_or_skip("CRS_TEST_DATABASE_URL")  # a table lock from a second connection: PostgreSQL's
    cluster = Cluster.objects.create(name="quiet", source_kind="simulator", source_config=UNDERUSED)
    with psycopg.connect(shared_database_url()) as other:
        other.execute("LOCK TABLE dashboard_capacitysample IN EXCLUSIVE MODE")  # held until the block ends
        tick = keep_collecting(cluster)

        def rounds():
            """three rounds while the count waits"""
            tick()
            return cluster.rounds.count() >= 3

        wait_until(rounds, timeout=60)
        assert not CapacitySample.objects.filter(cluster=cluster).exists()  # the count waits on the lock

    def counted():
        """this hour's three figures"""
        return CapacitySample.objects.filter(cluster=cluster).count() == 3

    wait_until(counted)


@pytest.mark.django_db(transaction=True)
def test_two_workers_moving_a_drained_power_down_on_at_once_shut_the_node_down_once(pve):
    """node1 holds only stopped guests: in maintenance it is drained at once; a round and a request
    advancing at the same moment call the shutdown once and audit it once."""
    from dashboard import power

    config = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file, "slow_reads_s": 0}
    cluster = Cluster.objects.create(name="pve", source_kind="proxmox", source_config=config)
    pve.lrm_mode["node1"] = "maintenance"
    collect.apply(args=[cluster.pk])
    PowerDown.objects.create(cluster=cluster, node="node1")
    race(lambda: power.advance(cluster.pk), 30)
    shutdowns = [r for r in pve.requests if r[:2] == ("POST", "nodes/node1/status")]
    assert shutdowns == [("POST", "nodes/node1/status", {"command": "shutdown"})]
    assert PowerDown.objects.get().state == "standby"
    assert AuditEvent.objects.filter(action="power-down-shutdown").count() == 1
