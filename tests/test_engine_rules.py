from engine_clusters import node, snapshot, vm

from crs.bundles import movable_bundles
from crs.placement import select_node
from crs.rules import compile_rules, node_affinity, resource_affinity

NODES = [node(f"node{i}") for i in (1, 2, 3, 4)]


def rules_of(guests, rules):
    snap = snapshot(NODES, guests, rules, mode="static")
    return snap, compile_rules(snap)


def test_non_strict_node_affinity_falls_back_to_the_other_nodes():
    _, rules = rules_of(
        [vm("vm:1", "node1")],
        [{"id": "r", "type": "node-affinity", "resources": ["vm:1"], "nodes": ["node1:2", "node2:1"], "strict": False}],
    )
    assert node_affinity(rules, "vm:1", ["node1", "node2", "node3"]) == ({"node1", "node2", "node3"}, {"node1"})
    assert node_affinity(rules, "vm:1", ["node2", "node3"])[1] == {"node2"}
    assert node_affinity(rules, "vm:1", ["node3", "node4"])[1] == {"node3", "node4"}


def test_strict_node_affinity_leaves_no_node_when_its_nodes_are_down():
    _, rules = rules_of(
        [vm("vm:1", "node1")],
        [{"id": "r", "type": "node-affinity", "resources": ["vm:1"], "nodes": ["node1"], "strict": True}],
    )
    assert node_affinity(rules, "vm:1", ["node2", "node3"]) == (set(), set())


def test_connected_positive_rules_merge_and_inherit_negatives_and_node_affinity():
    guests = [vm(f"vm:{i}", "node1") for i in range(1, 6)]
    rules = [
        {"id": "p1", "type": "resource-affinity", "resources": ["vm:1", "vm:2"], "affinity": "positive"},
        {"id": "p2", "type": "resource-affinity", "resources": ["vm:2", "vm:3"], "affinity": "positive"},
        {"id": "n", "type": "resource-affinity", "resources": ["vm:3", "vm:4"], "affinity": "negative"},
        {"id": "pin", "type": "node-affinity", "resources": ["vm:1"], "nodes": ["node2"], "strict": True},
    ]
    _, compiled = rules_of(guests, rules)
    assert compiled.positive["vm:1"] == {"vm:2", "vm:3"}
    assert "vm:4" in compiled.negative["vm:1"] and "vm:1" in compiled.negative["vm:4"]
    assert compiled.node_affinity["vm:3"].id == "pin"


def test_infeasible_rules_are_dropped_with_a_reason():
    guests = [vm(f"vm:{i}", "node1") for i in range(1, 7)]
    rules = [
        {
            "id": "too-many",
            "type": "resource-affinity",
            "resources": [f"vm:{i}" for i in range(1, 6)],
            "affinity": "negative",
        },
        {"id": "a", "type": "node-affinity", "resources": ["vm:6"], "nodes": ["node1"]},
        {"id": "b", "type": "node-affinity", "resources": ["vm:6"], "nodes": ["node2"]},
    ]
    _, compiled = rules_of(guests, rules)
    assert {rule_id for rule_id, _ in compiled.dropped} == {"too-many", "a", "b"}
    assert compiled.negative == {} and compiled.node_affinity == {}


def test_moving_positive_partner_pulls_towards_its_target_only():
    guests = [vm("vm:1", "node1", state="migrate", target="node2"), vm("vm:2", "node3")]
    snap, compiled = rules_of(
        guests, [{"id": "p", "type": "resource-affinity", "resources": ["vm:1", "vm:2"], "affinity": "positive"}]
    )
    together, _ = resource_affinity(compiled, "vm:2", {g.sid: g for g in snap.guests}, ["node1", "node2", "node3"])
    assert together == {"node2": 1}


def test_recovery_avoids_negative_partners_and_joins_positive_ones():
    guests = [vm("vm:1", "node1", state="recovery"), vm("vm:2", "node2"), vm("vm:3", "node3")]
    rules = [{"id": "n", "type": "resource-affinity", "resources": ["vm:1", "vm:2"], "affinity": "negative"}]
    snap = snapshot([dict(n, online=n["name"] != "node1") for n in NODES], guests, rules, mode="static")
    assert select_node(snap, "vm:1") in {"node3", "node4"}
    rules = [{"id": "p", "type": "resource-affinity", "resources": ["vm:1", "vm:3"], "affinity": "positive"}]
    snap = snapshot([dict(n, online=n["name"] != "node1") for n in NODES], guests, rules, mode="static")
    assert select_node(snap, "vm:1") == "node3"


def test_bundles_skip_split_moving_and_excluded_groups():
    guests = [
        vm("vm:1", "node1"),
        vm("vm:2", "node1"),
        vm("vm:3", "node1"),
        vm("vm:4", "node2"),
        vm("vm:5", "node1", auto_rebalance=False),
        vm("vm:6", "node1"),
        vm("vm:7", "node1", state="stopped"),
    ]
    rules = [
        {"id": "p12", "type": "resource-affinity", "resources": ["vm:1", "vm:2"], "affinity": "positive"},
        {"id": "p34", "type": "resource-affinity", "resources": ["vm:3", "vm:4"], "affinity": "positive"},
        {"id": "p56", "type": "resource-affinity", "resources": ["vm:5", "vm:6"], "affinity": "positive"},
    ]
    snap, compiled = rules_of(guests, rules)
    assert [(b.leader, b.guests) for b in movable_bundles(snap, compiled, "static")] == [("vm:1", ("vm:1", "vm:2"))]


def test_negative_node_affinity_keeps_guests_off_the_listed_nodes():
    guests = [vm("vm:1", "node1"), vm("vm:2", "node1")]
    rules = [
        {
            "id": "off12",
            "type": "node-affinity",
            "resources": ["vm:1"],
            "nodes": ["node1", "node2"],
            "affinity": "negative",
            "strict": True,
        },
        {
            "id": "off-all",
            "type": "node-affinity",
            "resources": ["vm:2"],
            "affinity": "negative",
            "nodes": ["node1", "node2", "node3", "node4"],
        },
    ]
    snap, compiled = rules_of(guests, rules)
    assert node_affinity(compiled, "vm:1", ["node1", "node2", "node3", "node4"])[1] == {"node3", "node4"}
    assert ("off-all", "keeps its guests off every node of the cluster") in compiled.dropped
    assert "vm:2" not in compiled.node_affinity


def test_negative_node_affinity_takes_no_priorities():
    import pytest

    from crs.errors import RuleError

    with pytest.raises(RuleError, match="rules\\[0\\].nodes: a negative node-affinity rule takes no priorities"):
        rules_of(
            [vm("vm:1", "node1")],
            [{"id": "r", "type": "node-affinity", "resources": ["vm:1"], "nodes": ["node1:2"], "affinity": "negative"}],
        )
