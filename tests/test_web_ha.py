"""HA rules, the auto-rebalance opt-out and the N+1 verdict on the web side: rule edits through the
API, the page and the admin (valid, infeasible as Proxmox would drop them, bad input naming the
field), a Proxmox cluster's rules read-only, and the N+1 verdict of a cluster built to fail it,
computed by the refresh task a real worker's round queues, stored, served and pushed."""

import json

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from conftest import run_rounds, wait_until
from django.urls import reverse
from test_web_tasks import worker  # noqa: F401 (a fixture)

from dashboard.live import sender as live
from dashboard.models import AuditEvent, Cluster, HaRule, RebalanceOptOut
from dashboard.tasks import balancing_round, collect, n1_refresh

GIB = 2**30
RULES = "/api/v1/rules/"


def sids_on(cluster, node):
    return [g["sid"] for g in cluster.snapshot["guests"] if g["node"] == node]


@pytest.mark.django_db
def test_a_valid_rule_is_stored_audited_and_carried_by_the_snapshot(admin_client, collected):
    guest = sids_on(collected, "node01")[0]
    body = {
        "cluster": collected.pk,
        "rule": "db-on-fast",
        "type": "node-affinity",
        "resources": [guest],
        "nodes": [{"node": "node02", "priority": 2}, {"node": "node03", "priority": 1}],
        "strict": True,
    }
    answer = admin_client.post(RULES, body, content_type="application/json")
    assert answer.status_code == 201, answer.json()
    assert answer.json()["dropped"] == []
    collected.refresh_from_db()
    assert {
        "id": "db-on-fast",
        "type": "node-affinity",
        "resources": [guest],
        "strict": True,
        "affinity": "positive",
        "nodes": [{"node": "node02", "priority": 2}, {"node": "node03", "priority": 1}],
    } in collected.snapshot["rules"]
    event = AuditEvent.objects.get(action="rule-created")
    assert event.details["after"]["id"] == "db-on-fast" and event.actor.username == "admin"
    collect.apply(args=[collected.pk])  # the next round's snapshot carries it too
    collected.refresh_from_db()
    assert [r["id"] for r in collected.snapshot["rules"]] == ["db-on-fast"]

    rule = HaRule.objects.get()
    answer = admin_client.patch(f"{RULES}{rule.pk}/", {"strict": False}, content_type="application/json")
    assert answer.status_code == 200 and answer.json()["strict"] is False
    assert AuditEvent.objects.filter(action="rule-changed").count() == 1
    assert admin_client.delete(f"{RULES}{rule.pk}/").status_code == 204
    collected.refresh_from_db()
    assert collected.snapshot["rules"] == [] and AuditEvent.objects.filter(action="rule-deleted").count() == 1


@pytest.mark.django_db
def test_an_infeasible_rule_is_refused_with_proxmox_drop_messages_naming_the_rules(admin_client, collected):
    guest = sids_on(collected, "node01")[0]
    first = {
        "cluster": collected.pk,
        "rule": "pin-a",
        "type": "node-affinity",
        "resources": [guest],
        "nodes": [{"node": "node02"}],
    }
    assert admin_client.post(RULES, first, content_type="application/json").status_code == 201
    second = {**first, "rule": "pin-b", "nodes": [{"node": "node03"}]}
    answer = admin_client.post(RULES, second, content_type="application/json")
    assert answer.status_code == 400
    because = f"because resource '{guest}' is already used in another node affinity rule."
    assert set(answer.json()["non_field_errors"]) == {f"Drop rule 'pin-b', {because}", f"Drop rule 'pin-a', {because}"}
    assert list(HaRule.objects.values_list("rule", flat=True)) == ["pin-a"]  # nothing stored is lost

    seven = [g["sid"] for g in collected.snapshot["guests"]][:7]  # six nodes
    apart = {
        "cluster": collected.pk,
        "rule": "spread",
        "type": "resource-affinity",
        "resources": seven,
        "affinity": "negative",
    }
    answer = admin_client.post(RULES, apart, content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["non_field_errors"] == [
        "Drop rule 'spread', because rule defines more resources than available nodes."
    ]

    page = admin_client.post(
        reverse("dashboard:rule-new", args=[collected.pk]),
        {"rule": "pin-c", "type": "node-affinity", "resources": guest, "nodes": "node04:1"},
    )
    assert page.status_code == 400
    assert b"Drop rule &#x27;pin-c&#x27;, because resource" in page.content
    assert b'value="node04:1"' in page.content  # what was typed is kept


@pytest.mark.django_db
def test_bad_rule_input_is_refused_naming_the_field(admin_client, collected):
    guest = sids_on(collected, "node01")[0]
    good = {
        "cluster": collected.pk,
        "rule": "ok-rule",
        "type": "node-affinity",
        "resources": [guest],
        "nodes": [{"node": "node02"}],
    }
    cases = {
        "type": {"type": "sideways"},
        "resources": {"resources": ["vm:99999"]},
        "nodes": {"nodes": [{"node": "node99", "priority": 1}]},
        "rule": {"rule": "no spaces allowed"},
        "affinity": {"type": "resource-affinity", "resources": [guest, guest], "affinity": "maybe"},
    }
    for field, change in cases.items():
        answer = admin_client.post(RULES, {**good, **change}, content_type="application/json")
        assert answer.status_code == 400, (field, answer.content)
        assert field in answer.json(), (field, answer.json())
    assert "vm:99999" in answer_of(admin_client, {**good, "resources": ["vm:99999"]})["resources"][0]
    assert "node99" in answer_of(admin_client, {**good, "nodes": [{"node": "node99"}]})["nodes"][0]
    page = admin_client.post(
        reverse("dashboard:rule-new", args=[collected.pk]),
        {"rule": "x1", "type": "resource-affinity", "resources": guest, "affinity": "negative"},
    )
    assert page.status_code == 400
    assert b'data-field="resources"' in page.content and b"at least two guests" in page.content
    assert not HaRule.objects.exists()


def answer_of(client, body):
    return client.post(RULES, body, content_type="application/json").json()


@pytest.mark.django_db
def test_a_proxmox_clusters_rules_are_read_only_with_a_link_to_proxmox(admin_client, collected):
    proxmox = Cluster.objects.create(
        name="pve", source_kind="proxmox", source_config={"host": "pve.example"}, snapshot=collected.snapshot
    )
    guest = sids_on(collected, "node01")[0]
    body = {
        "cluster": proxmox.pk,
        "rule": "pin",
        "type": "node-affinity",
        "resources": [guest],
        "nodes": [{"node": "node02"}],
    }
    answer = admin_client.post(RULES, body, content_type="application/json")
    assert answer.status_code == 409 and "edited in Proxmox" in answer.json()["cluster"][0]
    state = admin_client.get(f"/api/v1/clusters/{proxmox.pk}/rules/").json()
    assert state["editable"] is False and state["edit_url"] == "https://pve.example:8006/"
    page = admin_client.get(reverse("dashboard:rules", args=[proxmox.pk]))
    assert b'id="proxmox-rules-link"' in page.content and b"Add rule" not in page.content

    # Rules Proxmox itself would drop (two node-affinity rules on one guest) are shown with the reason.
    pinned = [
        {
            "id": name,
            "type": "node-affinity",
            "resources": [guest],
            "nodes": [{"node": node, "priority": 0}],
            "strict": False,
            "affinity": "positive",
        }
        for name, node in (("pin-a", "node02"), ("pin-b", "node03"))
    ]
    Cluster.objects.filter(pk=proxmox.pk).update(snapshot={**collected.snapshot, "rules": pinned})
    state = admin_client.get(f"/api/v1/clusters/{proxmox.pk}/rules/").json()
    because = f"resource '{guest}' is already used in another node affinity rule"
    assert [(r["id"], r["dropped"]) for r in state["rules"]] == [("pin-a", [because]), ("pin-b", [because])]
    page = admin_client.get(reverse("dashboard:rules", args=[proxmox.pk])).content.decode()
    assert f"Proxmox drops it, because {because}.".replace("'", "&#x27;") in page


@pytest.mark.django_db
def test_opt_out_is_carried_by_the_snapshot_and_refuses_unknown_guests(admin_client, collected):
    guest = sids_on(collected, "node01")[0]
    answer = admin_client.post(
        "/api/v1/rebalance-opt-outs/", {"cluster": collected.pk, "guest": guest}, content_type="application/json"
    )
    assert answer.status_code == 201
    again = admin_client.post(
        "/api/v1/rebalance-opt-outs/", {"cluster": collected.pk, "guest": guest}, content_type="application/json"
    )
    assert again.status_code == 200 and again.json()["id"] == answer.json()["id"]  # safe to retry
    collected.refresh_from_db()
    assert next(g for g in collected.snapshot["guests"] if g["sid"] == guest)["auto_rebalance"] is False
    bad = admin_client.post(
        "/api/v1/rebalance-opt-outs/", {"cluster": collected.pk, "guest": "vm:99999"}, content_type="application/json"
    )
    assert bad.status_code == 400 and "vm:99999" in bad.json()["guest"][0]
    assert admin_client.delete(f"/api/v1/rebalance-opt-outs/{answer.json()['id']}/").status_code == 204
    assert not RebalanceOptOut.objects.exists()
    assert [e.action for e in AuditEvent.objects.order_by("pk")] == ["rebalance-opt-out", "rebalance-opt-in"]


def failing_snapshot() -> dict:
    """Two 16 GiB nodes, each holding 12 GiB of HA guests: losing either overloads the other to 150 % memory."""
    nodes = [{"name": f"node0{i}", "cpus": 16, "memory_bytes": 16 * GIB} for i in (1, 2)]
    guests = [
        {"sid": f"vm:{100 + i}", "node": f"node0{1 + i % 2}", "cores": 2, "memory_bytes": 6 * GIB} for i in range(4)
    ]
    return {"format": "crs-snapshot/1", "cluster": "tight", "nodes": nodes, "guests": guests}


@pytest.mark.django_db(transaction=True)
def test_n1_verdict_of_a_cluster_built_to_fail_it_is_computed_beside_a_round_served_and_pushed(
    admin_client,
    worker,  # noqa: F811
):
    cluster = Cluster.objects.create(
        name="tight", source_kind="snapshot", source_config={"snapshot": failing_snapshot()}
    )
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(live.group_name(cluster.pk), channel)
    collect.delay(cluster.pk)

    def computed():
        """the refresh the round queued stored an N+1 verdict"""
        return Cluster.objects.get(pk=cluster.pk).n1

    verdict = wait_until(computed)
    assert verdict["survives"] is False
    assert verdict["verdict"].startswith("losing node01 overloads node02 to 150 % memory")
    loss = next(x for x in verdict["losses"] if x["node"] == "node01")
    assert (loss["recovered"], loss["lost_count"], loss["lost"]) == (2, 0, [])
    assert [o["node"] for o in loss["overloaded"]] == ["node02"] and loss["overloaded"][0]["memory"] == 1.5

    served = admin_client.get(f"/api/v1/clusters/{cluster.pk}/n1/")
    assert served.status_code == 200 and served.json()["verdict"] == verdict["verdict"]
    # Where each guest goes is not stored: the admin opening node01 asks for it.
    detail = admin_client.get(f"/api/v1/clusters/{cluster.pk}/n1-loss/", {"node": "node01"}).json()
    assert {r["sid"]: r["target"] for r in detail["recoveries"]} == {"vm:100": "node02", "vm:102": "node02"}
    assert [(x["node"], x["memory"]) for x in detail["loads"]] == [("node02", 1.5)]
    assert detail["summary"] == loss["summary"]
    unknown = admin_client.get(f"/api/v1/clusters/{cluster.pk}/n1-loss/", {"node": "node09"})
    assert unknown.status_code == 400 and "node01, node02" in unknown.json()["node"][0]
    pushed = []
    while not pushed:
        payload = json.loads(async_to_sync(layer.receive)(channel)["text"])  # live.push: JSON encoded once
        if payload["type"] == "n1":
            pushed.append(payload)
    assert pushed[0]["verdict"] == verdict["verdict"]
    page = admin_client.get(reverse("dashboard:cluster", args=[cluster.pk]))
    assert b"overloads node02 to 150 % memory" in page.content  # embedded for the first paint


@pytest.mark.django_db
def test_a_round_queues_the_n1_refresh_once_and_the_verdict_appears_when_it_runs(
    collected, monkeypatch, django_capture_on_commit_callbacks
):
    from dashboard import n1, tasks

    computed, queued = [], []
    refresh = n1.refresh
    monkeypatch.setattr(n1, "refresh", lambda *args: computed.append(args) or refresh(*args))
    monkeypatch.setattr(tasks.n1_refresh, "apply_async", lambda args, **options: queued.append(args))
    run_rounds(collected, 2, django_capture_on_commit_callbacks)  # the second while the first's is queued
    assert queued == [(collected.pk,)] and computed == []  # the rounds computed no verdict themselves
    assert Cluster.objects.get(pk=collected.pk).n1 is None

    n1_refresh.apply(args=[collected.pk])  # as the worker runs it
    stored = Cluster.objects.get(pk=collected.pk)
    assert len(computed) == 1 and stored.n1["losses"] and stored.n1_queued_until is None
    run_rounds(collected, 1, django_capture_on_commit_callbacks)
    assert queued == [(collected.pk,)]  # fresh: the next round waits its cadence
    Cluster.objects.filter(pk=collected.pk).update(n1_at=None)  # due again, as a minute later
    run_rounds(collected, 1, django_capture_on_commit_callbacks)
    assert queued == [(collected.pk,)] * 2


@pytest.mark.django_db
def test_the_admin_checks_rules_as_the_api_does(admin_client, collected):
    guest = sids_on(collected, "node01")[0]
    form = {
        "cluster": collected.pk,
        "rule": "pin-a",
        "type": "node-affinity",
        "resources": f'["{guest}"]',
        "nodes": '[{"node": "node02", "priority": 1}]',
        "affinity": "positive",
    }
    answer = admin_client.post("/admin/dashboard/harule/add/", form)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert AuditEvent.objects.filter(action="rule-created", details__rule="pin-a").exists()
    answer = admin_client.post("/admin/dashboard/harule/add/", {**form, "rule": "pin-b"})
    assert answer.status_code == 200  # the form again, with Proxmox's reason
    assert "Drop rule &#x27;pin-b&#x27;, because resource" in answer.content.decode()
    assert HaRule.objects.count() == 1


@pytest.mark.django_db
def test_a_negative_node_affinity_rule_keeps_guests_off_its_nodes_and_is_checked(admin_client, collected):
    guest = sids_on(collected, "node01")[0]
    off = {
        "cluster": collected.pk,
        "rule": "not-on-01-02",
        "type": "node-affinity",
        "resources": [guest],
        "nodes": [{"node": "node01"}, {"node": "node02"}],
        "affinity": "negative",
        "strict": True,
    }
    answer = admin_client.post(RULES, off, content_type="application/json")
    assert answer.status_code == 201, answer.json()
    assert answer.json()["affinity"] == "negative" and answer.json()["dropped"] == []
    collected.refresh_from_db()
    carried = next(r for r in collected.snapshot["rules"] if r["id"] == "not-on-01-02")
    assert carried["affinity"] == "negative" and [n["node"] for n in carried["nodes"]] == ["node01", "node02"]
    page = admin_client.get(reverse("dashboard:rules", args=[collected.pk])).content.decode()
    assert "negative node affinity, strict" in page and "kept off node01 node02" in page

    priorities = {**off, "rule": "with-priority", "resources": [sids_on(collected, "node02")[0]]}
    priorities["nodes"] = [{"node": "node03", "priority": 2}]
    answer = admin_client.post(RULES, priorities, content_type="application/json")
    assert answer.status_code == 400 and "takes no priorities" in answer.json()["nodes"][0]
    everywhere = {**priorities, "rule": "nowhere", "nodes": [{"node": f"node0{i}"} for i in range(1, 7)]}
    answer = admin_client.post(RULES, everywhere, content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["non_field_errors"] == [
        "Drop rule 'nowhere', because rule keeps its guests off every node of the cluster."
    ]
    form = admin_client.post(  # the page's form: the same checks, what was typed kept
        reverse("dashboard:rule-new", args=[collected.pk]),
        {"rule": "nowhere", "type": "node-affinity", "resources": guest, "affinity": "negative", "nodes": "node03:1"},
    )
    assert form.status_code == 400 and b"takes no priorities" in form.content and b'value="node03:1"' in form.content
    assert list(HaRule.objects.values_list("rule", flat=True)) == ["not-on-01-02"]

    # the guest sits on node01, which its rule now forbids: the next round owes a fix naming the rule
    balancing_round.apply(args=[collected.pk])
    fix = collected.migrations.get(kind="rule-fix", leader=guest)
    assert fix.priority == 1 and fix.source == "node01" and fix.target not in ("node01", "node02")
    assert "'not-on-01-02'" in fix.explanation
