import json
from pathlib import Path

import pytest
from engine_clusters import node, snapshot, vm

from crs.bundles import movable_bundles
from crs.errors import RuleError
from crs.placement import select_node
from crs.rules import command_motion, compile_rules, node_affinity, resource_affinity

NODES = [node(f"node{i}") for i in (1, 2, 3, 4)]
RULES_CASES = Path(__file__).parent / "fixtures" / "proxmox-rules"
UPSTREAM = json.loads((RULES_CASES / "infer-implicit-negative-resource-affinity.json").read_text())


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
    assert ("off-all", "rule keeps its guests off every node of the cluster") in compiled.dropped
    assert "vm:2" not in compiled.node_affinity


def test_negative_node_affinity_takes_no_priorities():
    import pytest

    from crs.errors import RuleError

    with pytest.raises(RuleError, match="rules\\[0\\].nodes: a negative node-affinity rule takes no priorities"):
        rules_of(
            [vm("vm:1", "node1")],
            [{"id": "r", "type": "node-affinity", "resources": ["vm:1"], "nodes": ["node1:2"], "affinity": "negative"}],
        )


def compile_upstream(rules):
    sids = sorted({sid for rule in rules for sid in rule["resources"]})
    nodes = [node(name) for name in UPSTREAM["nodes"]]  # upstream compiles its cases on node1..3
    return compile_rules(snapshot(nodes, [vm(sid, "node1") for sid in sids], rules, mode="static"))


def pairs(relation):
    return {frozenset((sid, partner)) for sid, partners in relation.items() for partner in partners}


def test_upstream_rules_file_compiles_to_proxmoxs_partners():
    """All four cases of upstream's rules file at once, as Proxmox compiles it."""
    compiled = compile_upstream([rule for case in UPSTREAM["cases"] for rule in case["rules"]])
    expected = UPSTREAM["expected"]
    assert sorted(rule_id for rule_id, _ in compiled.dropped) == expected["dropped"]
    assert {sid: sorted(p) for sid, p in compiled.positive.items()} == expected["positive"]
    assert {sid: sorted(p) for sid, p in compiled.negative.items()} == expected["negative"]
    explicit = {
        frozenset(pair)
        for case in UPSTREAM["cases"]
        for rule in case["rules"]
        if rule["affinity"] == "negative" and rule["id"] not in expected["dropped"]
        for pair in [(a, b) for a in rule["resources"] for b in rule["resources"] if a != b]
    }
    implicit = {frozenset(name.split("-")[-2:]) for name in expected["implicit_rules"]}
    assert pairs(compiled.negative) - explicit == implicit


@pytest.mark.parametrize("case", UPSTREAM["cases"], ids=lambda c: f"case{c['case']}")
def test_each_upstream_case_alone_infers_the_same_pairs(case):
    compiled = compile_upstream(case["rules"])
    members = {sid for rule in case["rules"] for sid in rule["resources"]}
    expected = {sid: p for sid, p in UPSTREAM["expected"]["negative"].items() if sid in members}
    assert {sid: sorted(p) for sid, p in compiled.negative.items()} == expected


def test_two_positive_groups_joined_by_one_negative_rule_are_not_kept_apart_wholesale():
    """{a1,a2} together, {b1,b2} together, a1 apart from b1: Proxmox infers a2–b1 and a1–b2,
    but a2 and b2 may share a node (the over-inference §5.2 corrects)."""
    compiled = compile_upstream(
        [
            {"id": "a", "type": "resource-affinity", "resources": ["vm:1", "vm:2"], "affinity": "positive"},
            {"id": "b", "type": "resource-affinity", "resources": ["vm:3", "vm:4"], "affinity": "positive"},
            {"id": "n", "type": "resource-affinity", "resources": ["vm:1", "vm:3"], "affinity": "negative"},
        ]
    )
    assert pairs(compiled.negative) == {frozenset(p) for p in [("vm:1", "vm:3"), ("vm:2", "vm:3"), ("vm:1", "vm:4")]}
    assert "vm:4" not in compiled.negative["vm:2"]


def test_an_admin_migration_is_refused_by_a_negative_partner_and_brings_positive_ones_along():
    """Proxmox's `queue_resource_motion`: a negative partner on the target (and not leaving it)
    refuses the command; positive partners not already on or bound for the target follow."""
    guests = [vm("vm:1", "node1"), vm("vm:2", "node2"), vm("vm:3", "node3"), vm("vm:4", "node1")]
    rules = [
        {"id": "apart", "type": "resource-affinity", "resources": ["vm:1", "vm:3"], "affinity": "negative"},
        {"id": "together", "type": "resource-affinity", "resources": ["vm:1", "vm:2", "vm:4"], "affinity": "positive"},
    ]
    snap, compiled = rules_of(guests, rules)
    by_sid = {g.sid: g for g in snap.guests}
    assert command_motion(compiled, "vm:1", "node3", by_sid) == ("vm:3", [])
    assert command_motion(compiled, "vm:1", "node4", by_sid) == (None, ["vm:2", "vm:4"])
    assert command_motion(compiled, "vm:1", "node2", by_sid) == (None, ["vm:4"])


UPSTREAM_FILES = sorted(p for p in RULES_CASES.glob("*.json") if "cases" not in json.loads(p.read_text()))


@pytest.mark.parametrize("path", UPSTREAM_FILES, ids=lambda p: p.stem)
def test_upstream_rule_files_compile_as_proxmox_compiles_them(path):
    """Each of upstream's rules_cfgs files: the rules it drops (with Proxmox's reason) and the
    compiled node and resource affinity. Disabled rules are not in effect, so not given."""
    case = json.loads(path.read_text())
    rules = [rule for rule in case["rules"] if not rule.get("disable")]
    if any(len(rule["resources"]) < 2 for rule in rules if rule["type"] == "resource-affinity"):
        with pytest.raises(RuleError, match=r"rules\[\d+\]\.resources: a resource-affinity rule needs at least two"):
            compile_upstream(rules)  # refused when the snapshot is read, naming the field, not dropped later
        return
    compiled = compile_upstream(rules)
    expected = case["expected"]
    assert sorted([rule_id, why] for rule_id, why in compiled.dropped) == expected["dropped"]
    assert {sid: sorted(p) for sid, p in compiled.positive.items() if p} == expected["positive"]
    assert {sid: sorted(p) for sid, p in compiled.negative.items() if p} == expected["negative"]
    nodes = UPSTREAM["nodes"]
    assert {
        sid: {n: dict(rule.nodes).get(n, -1) for n in nodes if n in dict(rule.nodes) or not rule.strict}
        for sid, rule in compiled.node_affinity.items()
    } == expected["node_affinity"]
