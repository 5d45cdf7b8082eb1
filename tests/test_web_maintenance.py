"""Maintenance from the API with a real worker: enter → evacuated → leave → failback; a rule
violation becoming a priority-1 recommendation that takes over from a balancing plan."""

import pytest
from conftest import keep_collecting, service_or_skip, set_policy, wait_until
from test_web_tasks import worker  # noqa: F401 (a fixture)

from crs import snapshot as contract
from crs.model import Guest, Node, Settings, Snapshot
from dashboard import ha
from dashboard.models import AuditEvent, Cluster, HaRule, Migration
from dashboard.tasks import balancing_round, collect

GIB = 2**30
SETTLED = ("done", "failed", "expired")


def url(cluster, what):
    return f"/api/v1/clusters/{cluster.pk}/maintenance/{what + '/' if what else ''}"


def on_node(cluster, node):
    cluster.refresh_from_db()
    return {g["sid"] for g in cluster.snapshot["guests"] if g["node"] == node and g["state"] == "started"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers  # a worker through rounds, mostly waiting: beside the rest
def test_enter_evacuates_the_node_and_leave_brings_its_guests_back(admin_client, collected, worker):  # noqa: F811
    service_or_skip("CRS_TEST_DATABASE_URL")
    cluster = collected
    set_policy(cluster, max_concurrent_migrations=4, max_migrations_per_node=8)  # manual automation
    node = "node06"
    held = on_node(cluster, node)
    assert held
    answer = admin_client.post(url(cluster, "enter"), {"node": node, "at_once": True}, content_type="application/json")
    assert answer.status_code == 200
    assert next(n for n in answer.json() if n["node"] == node)["maintenance"]
    tick = keep_collecting(cluster)

    def drained():
        """every guest left the node and the evacuation settled"""
        tick()
        moves = Migration.objects.filter(kind="evacuation")
        return not on_node(cluster, node) and moves.exists() and not moves.exclude(state__in=SETTLED).exists()

    wait_until(drained, timeout=120)
    evacuation = list(Migration.objects.filter(kind="evacuation"))
    assert {m.leader for m in evacuation if m.state == "done"} == held
    assert all(m.priority == 1 and m.source == node and m.target != node for m in evacuation)
    assert all(f"{node} enters maintenance" in m.explanation for m in evacuation)
    state = next(n for n in admin_client.get(url(cluster, "")).json() if n["node"] == node)
    assert state["maintenance"] and state["guests_left"] == 0

    assert admin_client.post(url(cluster, "leave"), {"node": node}, content_type="application/json").status_code == 200

    def returned():
        """the evacuated guests are back on the node (failback to the maintenance node)"""
        tick()
        moves = Migration.objects.filter(kind="failback")
        return on_node(cluster, node) == held and not moves.exclude(state__in=SETTLED).exists()

    wait_until(returned, timeout=120)
    assert {m.leader for m in Migration.objects.filter(kind="failback", state="done")} == held
    trail = list(AuditEvent.objects.filter(action__startswith="maintenance-").order_by("pk"))
    assert [(e.action, e.actor_name, e.details["node"]) for e in trail] == [
        ("maintenance-entered", "admin", node),
        ("maintenance-left", "admin", node),
    ]


@pytest.mark.django_db
def test_bad_node_is_refused_naming_the_field_and_repeating_enter_changes_nothing(admin_client, collected):
    answer = admin_client.post(url(collected, "enter"), {"node": "nope"}, content_type="application/json")
    assert answer.status_code == 400 and "node must be one of node01" in answer.json()["node"][0]
    for _ in range(2):
        assert (
            admin_client.post(url(collected, "enter"), {"node": "node02"}, content_type="application/json").status_code
            == 200
        )
    assert collected.maintenances.filter(node="node02", left_at=None).count() == 1
    assert AuditEvent.objects.filter(action="maintenance-entered").count() == 1


@pytest.mark.django_db
def test_an_operator_may_not_put_a_node_into_maintenance(client, operator, collected):
    client.force_login(operator)
    answer = client.post(url(collected, "enter"), {"node": "node02"}, content_type="application/json")
    assert answer.status_code == 403
    assert not collected.maintenances.exists()  # node02 is not in maintenance
    assert not AuditEvent.objects.exists()  # and nothing was recorded


def what_if():
    """Three nodes, node1 crowded: a balancing plan (and vm:1 where the test's rule will forbid it)."""
    nodes = tuple(Node(f"node{i}", 16, 64 * GIB) for i in (1, 2, 3))
    guests = tuple(Guest(f"vm:{i}", "node1", cores=2, memory_bytes=8 * GIB) for i in range(1, 7))
    return contract.to_dict(Snapshot(nodes, guests, (), Settings(), cluster="what-if"))


@pytest.mark.django_db(transaction=True)
def test_a_rule_violation_becomes_a_priority_1_recommendation_that_takes_over_from_balancing(worker):  # noqa: F811
    service_or_skip("CRS_TEST_DATABASE_URL")
    cluster = Cluster.objects.create(name="what-if", source_kind="snapshot", source_config={"snapshot": what_if()})
    set_policy(cluster, hold_duration=0)
    collect.delay(cluster.pk)
    balancing = wait_until(lambda: list(Migration.objects.filter(kind="balancing", state="suggested")))
    assert all(m.priority > 1 for m in balancing)
    # An admin adds the rule (the product keeps a snapshot cluster's rules: dashboard/ha.py).
    HaRule.objects.create(
        cluster=cluster,
        rule="vm1-on-node3",
        type="node-affinity",
        resources=["vm:1"],
        nodes=[{"node": "node3", "priority": 0}],
        strict=True,
    )
    collect.delay(cluster.pk)
    fix = wait_until(lambda: Migration.objects.filter(kind="rule-fix").first())
    assert (fix.priority, fix.leader, fix.source, fix.target, fix.state) == (1, "vm:1", "node1", "node3", "suggested")
    assert "'vm1-on-node3'" in fix.explanation
    for m in balancing:
        m.refresh_from_db()
        assert m.state == "expired" and f"replaced by rule-fix plan {fix.plan}" in m.reason
    recommended = Migration.objects.filter(state="suggested").order_by("priority", "plan", "step")
    assert recommended.first().pk == fix.pk
    # The rounds after it say the rule fix goes first, and make no balancing plan meanwhile.
    tick = keep_collecting(cluster)

    def second_round_after_the_fix():
        """two rounds after the rule fix was suggested"""
        tick()
        later = list(cluster.rounds.filter(at__gt=fix.suggested_at).order_by("at"))
        return later[1] if len(later) > 1 else None

    round_ = wait_until(second_round_after_the_fix)
    assert "a rule fix goes first" in round_.explanation["waiting"]
    assert not Migration.objects.filter(kind="balancing", state="suggested").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("automation", "approved"), [("manual", False), ("partial", True), ("automatic", True)])
def test_partial_automation_approves_owed_moves_whatever_its_margin(collected, automation, approved):
    """An owed move ignores margins: `partial` approves a rule fix even with an automatic margin
    no balancing step could clear; only `manual` leaves it to a person."""
    set_policy(collected, automation=automation, automatic_margin=1.0)
    guest = sorted(on_node(collected, "node01"))[0]
    rule = {"rule": "off-node01", "type": "node-affinity", "resources": [guest], "nodes": [{"node": "node01"}]}
    ha.save_rule(collected.pk, rule | {"strict": True, "affinity": "negative"}, None, None)  # as the page saves it
    balancing_round.apply(args=[collected.pk])
    fix = Migration.objects.get(kind="rule-fix", leader=guest)
    assert fix.priority == 1 and "'off-node01'" in fix.explanation
    assert fix.state == ("approved" if approved else "suggested")
    if approved:
        event = AuditEvent.objects.get(action="approved", migration=fix)
        assert event.actor is None and event.details["automation"] == automation
