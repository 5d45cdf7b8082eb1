"""Maintenance evacuation, failback, rule-violation fixes and plan precedence, checked against
Proxmox's own regression tests (pve-ha-manager 5.2.0, converted in tests/fixtures/proxmox)."""

from dataclasses import replace
from pathlib import Path

import pytest
from proxmox_replay import Manager, load

from crs import maintenance, mandatory, precedence, violations
from crs import snapshot as contract
from crs.model import Guest, Node, NodeAffinityRule, ResourceAffinityRule, Settings, Snapshot

FIXTURES = Path(__file__).parent / "fixtures" / "proxmox"
GIB = 2**30


def fixture_snapshot(name: str) -> tuple[dict, Snapshot]:
    fixture = load(FIXTURES / f"{name}.json")
    return fixture, Manager(fixture).snapshot()


@pytest.mark.parametrize(
    "name",
    [
        "proxmox-crs-static3-maintenance-migrate",
        "proxmox-crs-static4-maintenance-heavy-first",
        "proxmox-crs-static5-maintenance-cpu-headroom",
    ],
)
def test_evacuation_sends_each_guest_where_proxmox_does_in_its_order(name):
    fixture, snapshot = fixture_snapshot(name)
    node = fixture["event"]["node"]
    plan = maintenance.evacuate(snapshot, node)
    expected = [(d["sid"], d["target"]) for d in fixture["expected_decisions"]]
    assert [(s.move.leader, s.move.target) for s in plan.steps] == expected
    assert all(s.move.source == node for s in plan.steps)
    assert node not in plan.loads_after  # the node in maintenance carries nothing
    assert [s.after for s in plan.steps] == [None, *range(len(plan.steps) - 1)]  # each counted before the next


def test_one_walk_evacuates_as_the_per_node_plan_does():
    """Proxmox's manager evacuates and fixes rules in one sid-order walk (what the product lists
    of a Proxmox cluster's own moves): on static3 its evacuation is the fixture's, step for step."""
    fixture, snapshot = fixture_snapshot("proxmox-crs-static3-maintenance-migrate")
    walk = violations.violations(maintenance.in_maintenance(snapshot, "node1"), evacuating=True)
    expected = [(d["sid"], d["target"]) for d in fixture["expected_decisions"]]
    assert [(s.move.leader, s.move.target) for s in walk.steps] == expected
    assert all(why.startswith("node1 is in maintenance") for why in walk.reasons)


def test_stopped_guests_stay_and_the_plan_says_the_loads_after():
    fixture, snapshot = fixture_snapshot("proxmox-crs-static3-maintenance-migrate")
    plan = maintenance.evacuate(snapshot, "node1")
    assert "vm:100" not in {s.move.leader for s in plan.steps}  # stopped: stays on node1
    # 6 VMs of 2 cores / 4 GB on node2 (64 CPUs, 200 GB), 3 on node3 (32 CPUs, 100 GB): equal loads
    assert plan.loads_after["node2"] == pytest.approx((12 / 64 + 24e9 / 200e9) / 2)
    assert plan.loads_after["node3"] == pytest.approx((6 / 32 + 12e9 / 100e9) / 2)


def test_guests_someone_else_evacuates_are_left_to_them():
    _, snapshot = fixture_snapshot("proxmox-crs-static3-maintenance-migrate")
    ha = frozenset({"vm:101", "vm:102"})
    plan = maintenance.evacuate(snapshot, "node1", skip=ha)
    assert {s.move.leader for s in plan.steps} == {f"vm:{i}" for i in range(103, 110)}


def test_guests_return_when_their_node_is_back_from_maintenance():
    fixture, snapshot = fixture_snapshot("proxmox-basic-shutdown-policy3-maintenance-return")
    plan = maintenance.evacuate(snapshot, "node3")
    assert [(s.move.leader, s.move.target) for s in plan.steps] == [("ct:102", "node1"), ("vm:103", "node2")]
    moved = {s.move.leader: s.move.target for s in plan.steps}
    evacuated = replace(snapshot, guests=tuple(replace(g, node=moved.get(g.sid, g.node)) for g in snapshot.guests))
    back = maintenance.failback(evacuated, "node3", list(moved))
    assert [(s.move.leader, s.move.source, s.move.target) for s in back.steps] == [
        ("ct:102", "node1", "node3"),
        ("vm:103", "node2", "node3"),
    ]  # as the fixture's second step expects


def test_no_failback_where_a_rule_now_keeps_the_guest_elsewhere():
    nodes = tuple(Node(f"n{i}", 8, 64 * GIB) for i in (1, 2, 3))
    guests = (Guest("vm:1", "n2", memory_bytes=GIB),)
    rule = NodeAffinityRule("stay-on-n2", ("vm:1",), (("n2", 0),), strict=True)
    snapshot = Snapshot(nodes, guests, (rule,))
    assert maintenance.failback(snapshot, "n1", ["vm:1"]).steps == ()


@pytest.mark.parametrize(
    ("name", "rule"), [("proxmox-node-affinity-strict1", "strict"), ("proxmox-node-affinity-nonstrict1", "prefers")]
)
def test_a_guest_moved_outside_its_node_affinity_gets_proxmox_s_corrective_move(name, rule):
    fixture, snapshot = fixture_snapshot(name)
    rule_id = fixture["rules"][0]["id"]
    moved = replace(snapshot, guests=tuple(replace(g, node="node2") for g in snapshot.guests))  # the manual migration
    fixes = violations.violations(moved)
    assert [(s.move.leader, s.move.source, s.move.target) for s in fixes.steps] == [("vm:101", "node2", "node3")]
    assert f"'{rule_id}'" in fixes.reasons[0] and rule in fixes.reasons[0]
    assert violations.violations(snapshot).steps == ()  # where it belongs: nothing to fix


def as_proxmox_runs_it(snapshot: Snapshot) -> list[tuple[str, str]]:
    """The moves Proxmox's manager makes at t=20 for `snapshot`'s guests and rules, from the
    fixture harness that replays Proxmox's own tests decision for decision."""
    fixture = {
        "mode": snapshot.settings.mode,
        "options": {},
        "nodes": [
            {"name": n.name, "cpus": n.cpus, "memory_bytes": n.memory_bytes, "online": True} for n in snapshot.nodes
        ],
        "services": [
            {"sid": g.sid, "node": g.node, "state": "started", "cores": g.cores, "memory_bytes": g.memory_bytes}
            for g in snapshot.guests
        ],
        "rules": contract.to_dict(snapshot)["rules"],
    }
    manager = Manager(fixture)
    manager.event({"type": "initial_start"})
    return [(sid, target) for sid, action, target in manager.decisions if action in ("migrate", "relocate")]


def test_negative_partners_on_one_node_are_separated_as_proxmox_does_naming_the_rule():
    """Hand-checked, static mode: vm:1 and vm:2 (1 GiB each) share n1 against a negative rule;
    vm:3 (4 cores, 4 GiB) is on n2. In sid order vm:1 leaves n1 (vm:2 is there) for the empty n3.
    Proxmox then counts vm:1 as migrating, on n1 and on n3, so vm:2 finds both taken and goes
    to n2: two migrations, where one would have done once vm:1 settled. The product gives
    Proxmox's answer, as the harness replaying Proxmox's tests does."""
    nodes = tuple(Node(f"n{i}", 8, 64 * GIB) for i in (1, 2, 3))
    guests = (Guest("vm:1", "n1", memory_bytes=GIB), Guest("vm:2", "n1", memory_bytes=GIB), Guest("vm:3", "n2"))
    rule = ResourceAffinityRule("keep-apart", ("vm:1", "vm:2"), "negative")
    snapshot = Snapshot(nodes, guests, (rule,))
    fixes = violations.violations(snapshot)
    assert [(s.move.leader, s.move.source, s.move.target) for s in fixes.steps] == [
        ("vm:1", "n1", "n3"),
        ("vm:2", "n1", "n2"),
    ]
    assert [(s.move.leader, s.move.target) for s in fixes.steps] == as_proxmox_runs_it(snapshot)
    assert "'keep-apart'" in fixes.reasons[0] and "apart from vm:2" in fixes.reasons[0]
    assert fixes.rules == (("keep-apart",), ("keep-apart",))
    assert violations.violations(snapshot, skip=frozenset({"vm:1", "vm:2"})).steps == ()
    # once vm:1 has settled on n3, vm:2 is alone on n1: its move is no longer owed, and expires
    settled = replace(snapshot, guests=tuple(replace(g, node="n3") if g.sid == "vm:1" else g for g in guests))
    assert "no longer breaks a rule" in (mandatory.stale_reason(settled, fixes.steps[1].move, "rule-fix") or "")


def test_a_guest_still_migrating_counts_on_the_node_it_leaves_as_proxmox_counts_it():
    """Hand-checked, basic mode (a node's score = the guests counted on it): vm:1 must go from
    n3 to n1, vm:2 from n2 to n1 or n3 (strict rules). vm:1 goes first (sid order); while it
    migrates it counts on n1 and on n3, one guest each, and the tie goes to the first name:
    vm:2 → n1. Counted on its target only, vm:1 would leave n3 empty and send vm:2 there."""
    nodes = tuple(Node(f"n{i}", 8, 64 * GIB) for i in (1, 2, 3))
    guests = (Guest("vm:1", "n3"), Guest("vm:2", "n2"), Guest("vm:4", "n2"))
    rules = (
        NodeAffinityRule("vm1-on-n1", ("vm:1",), (("n1", 0),), strict=True),
        NodeAffinityRule("vm2-off-n2", ("vm:2",), (("n2", 0),), strict=True, affinity="negative"),
    )
    snapshot = Snapshot(nodes, guests, rules, Settings(mode="basic"))
    fixes = violations.violations(snapshot)
    assert [(s.move.leader, s.move.target) for s in fixes.steps] == [("vm:1", "n1"), ("vm:2", "n1")]
    assert [(s.move.leader, s.move.target) for s in fixes.steps] == as_proxmox_runs_it(snapshot)
    assert fixes.rules == (("vm1-on-n1",), ("vm2-off-n2",))


def test_positive_partners_apart_are_joined_on_the_majority_node():
    nodes = tuple(Node(f"n{i}", 8, 64 * GIB) for i in (1, 2, 3))
    guests = (Guest("vm:1", "n1"), Guest("vm:2", "n2"), Guest("vm:3", "n2"))
    rule = ResourceAffinityRule("together", ("vm:1", "vm:2", "vm:3"), "positive")
    fixes = violations.violations(Snapshot(nodes, guests, (rule,)))
    assert [(s.move.leader, s.move.target) for s in fixes.steps] == [("vm:1", "n2")]
    assert "'together'" in fixes.reasons[0]


def test_a_fix_goes_stale_once_the_guest_keeps_its_rules():
    nodes = tuple(Node(f"n{i}", 8, 64 * GIB) for i in (1, 2, 3))
    rule = NodeAffinityRule("on-n3", ("vm:1",), (("n3", 0),), strict=True)
    broken = Snapshot(nodes, (Guest("vm:1", "n1"),), (rule,))
    step = violations.violations(broken).steps[0]
    assert mandatory.stale_reason(broken, step.move, "rule-fix") is None
    rule_gone = replace(broken, rules=())
    assert "no longer breaks a rule" in (mandatory.stale_reason(rule_gone, step.move, "rule-fix") or "")


def test_an_evacuation_goes_stale_when_its_node_leaves_maintenance():
    _, snapshot = fixture_snapshot("proxmox-crs-static3-maintenance-migrate")
    step = maintenance.evacuate(snapshot, "node1").steps[0]
    assert mandatory.stale_reason(maintenance.in_maintenance(snapshot, "node1"), step.move, "evacuation") is None
    assert "no longer in maintenance" in (mandatory.stale_reason(snapshot, step.move, "evacuation") or "")


def test_precedence_evacuation_then_rule_fix_then_pressure_then_balancing_then_consolidation():
    order = ["consolidation", "balancing", "pressure", "rule-fix", "evacuation"]
    assert sorted(order, key=precedence.rank) == order[::-1]
    assert precedence.outranks("rule-fix", "balancing") and not precedence.outranks("balancing", "rule-fix")
    assert not precedence.outranks("failback", "evacuation")  # the way back is part of the maintenance
