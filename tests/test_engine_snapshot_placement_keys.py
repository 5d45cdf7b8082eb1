"""The contract's optional keys for pressure and for where a guest may go (docs/snapshot-format.md)."""

import pytest

from crs.errors import SnapshotError
from crs.model import Node, Pressure
from crs.snapshot import parse, to_dict

BASE = {
    "format": "crs-snapshot/1",
    "nodes": [
        {"name": "a", "cpus": 8, "memory_bytes": 2**34},
        {"name": "b", "cpus": 8, "memory_bytes": 2**34, "traits": ["gpu"], "ksm_bytes": 2**30, "uptime_s": 86400},
    ],
    "guests": [
        {
            "sid": "vm:1",
            "node": "a",
            "pressure": {"cpu_some": 0.2, "memory_full": 0.01},
            "uptime_s": 3600,
            "allowed_nodes": ["a"],
            "pinned_reason": "local disk local-lvm:vm-1-disk-0",
            "recoverable": False,
            "requires": ["!gpu"],
        }
    ],
}


def snapshot(**guest_changes):
    guest = {**BASE["guests"][0], **guest_changes}
    return parse({**BASE, "guests": [guest]})


def test_keys_read_and_round_trip():
    s = snapshot()
    g = s.guests[0]
    assert g.pressure == Pressure(cpu_some=0.2, memory_full=0.01) and g.uptime_s == 3600
    assert g.allowed_nodes == {"a"} and not g.recoverable and g.pinned_reason.startswith("local disk")
    assert s.nodes[1].traits == {"gpu"} and s.nodes[1].ksm_bytes == 2**30 and s.nodes[1].uptime_s == 86400
    assert parse(to_dict(s)) == s


def test_files_without_the_keys_keep_their_meaning():
    plain = parse({**BASE, "guests": [{"sid": "vm:1", "node": "a"}]})
    g = plain.guests[0]
    assert g.pressure is None and g.allowed_nodes is None and g.recoverable and g.requires == frozenset()
    assert "pressure" not in to_dict(plain)["guests"][0] and "allowed_nodes" not in to_dict(plain)["guests"][0]
    assert plain.nodes[0].uptime_s is None and "uptime_s" not in to_dict(plain)["nodes"][0]


def test_required_and_forbidden_traits():
    g = snapshot(requires=["gpu", "!maintenance-window"], allowed_nodes=None).guests[0]
    assert g.may_run_on(Node("b", 8, 1, traits=frozenset({"gpu"})))
    assert not g.may_run_on(Node("b", 8, 1, traits=frozenset({"gpu", "maintenance-window"})))
    assert not g.may_run_on(Node("a", 8, 1))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pressure": {"cpu_some": 75}}, r"guests\[0\]\.pressure\.cpu_some: 75 is out of range"),
        ({"pressure": {"cpu": 0.1}}, r"guests\[0\]\.pressure\.cpu: unknown key"),
        ({"allowed_nodes": ["z"]}, r"guests\[0\]\.allowed_nodes\[0\]: 'z' is not a node"),
        ({"requires": "gpu"}, r"guests\[0\]\.requires: 'gpu' is not a list"),
        ({"pinned_reason": 3}, r"guests\[0\]\.pinned_reason: 3 is not a non-empty string"),
        ({"recoverable": "no"}, r"guests\[0\]\.recoverable: 'no' is not true or false"),
    ],
)
def test_bad_values_are_refused_naming_the_key(change, message):
    with pytest.raises(SnapshotError, match=message):
        snapshot(**change)


def test_a_standby_node_takes_no_guest_no_recovery_and_no_part_in_the_imbalance():
    from crs.balancer import run_round
    from crs.decision import RoundState
    from crs.n1 import n1
    from crs.placement import select_node

    def cluster(standby):
        nodes = [
            {"name": "a", "cpus": 8, "memory_bytes": 2**34, "cpu_usage": 6.0},
            {"name": "b", "cpus": 8, "memory_bytes": 2**34, "cpu_usage": 6.0},
            {"name": "c", "cpus": 8, "memory_bytes": 2**34} | ({"standby": True} if standby else {}),
        ]
        guests = [
            {"sid": "vm:1", "node": "a", "cores": 1, "cpu_usage": 6.0},
            {"sid": "vm:2", "node": "b", "cores": 1, "cpu_usage": 6.0},
            {"sid": "vm:3", "node": "a", "state": "stopped", "cores": 1},
        ]
        return parse({"format": "crs-snapshot/1", "settings": {"mode": "dynamic"}, "nodes": nodes, "guests": guests})

    awake, asleep = cluster(False), cluster(True)
    assert asleep.node("c").standby and not asleep.node("c").usable
    assert to_dict(asleep)["nodes"][2]["standby"] is True and "standby" not in to_dict(awake)["nodes"][2]
    assert parse(to_dict(asleep)) == asleep
    # placement: the idle node c wins when awake, is never chosen asleep
    assert select_node(awake, "vm:3") == "c"
    assert select_node(asleep, "vm:3") != "c"
    # imbalance: a and b equally loaded; an idle awake c makes it uneven, an asleep c does not count
    assert run_round(asleep, RoundState()).imbalance == 0.0 < run_round(awake, RoundState()).imbalance

    # recovery: if a fails, its HA guest may go to c only while c is awake
    def targets(snap):
        return {r.target for loss in n1(snap).losses if loss.node == "a" for r in loss.recoveries}

    assert "c" in targets(awake) and "c" not in targets(asleep)
    assert [loss.node for loss in n1(asleep).losses] == ["a", "b"]  # an asleep node is no loss to survive
