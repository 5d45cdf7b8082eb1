import copy
import math

import pytest

from crs.errors import CrsError, RuleError, SnapshotError
from crs.snapshot import parse, to_dict

GOOD = {
    "format": "crs-snapshot/1",
    "cluster": "lab",
    "settings": {"mode": "dynamic", "threshold": 0.3, "hold_duration": 3, "margin": 0.1},
    "nodes": [
        {"name": "node1", "cpus": 32, "memory_bytes": 2**37},
        {"name": "node2", "cpus": 32, "memory_bytes": 2**37},
    ],
    "guests": [
        {"sid": "vm:101", "node": "node1", "cores": 4, "memory_bytes": 2**33, "cpu_usage": 1.2, "mem_usage_bytes": 6e9},
        {"sid": "ct:102", "node": "node2"},
    ],
    "rules": [
        {"id": "apart", "type": "resource-affinity", "resources": ["vm:101", "ct:102"], "affinity": "negative"},
        {"id": "pin", "type": "node-affinity", "resources": ["vm:101"], "nodes": ["node1:2", {"node": "node2"}]},
    ],
}


def with_change(path, value):
    doc = copy.deepcopy(GOOD)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


def test_round_trip_keeps_everything():
    snap = parse(GOOD)
    assert parse(to_dict(snap)) == snap
    assert snap.rules[1].nodes == (("node1", 2), ("node2", 0))


BAD = [
    (("format",), "crs-snapshot/9", "format"),
    (("settings", "mode"), "fast", "settings.mode: 'fast' is not one of basic, static, dynamic"),
    (("settings", "method"), "greedy", "settings.method"),
    (("settings", "threshold"), -0.1, "settings.threshold: -0.1 is out of range"),
    (("settings", "margin"), 1.5, "settings.margin"),
    (("settings", "hold_duration"), 1.5, "settings.hold_duration"),
    (("settings", "colour"), "red", "settings.colour: unknown key"),
    (("nodes", 0, "cpus"), -1, "nodes[0].cpus: -1 is out of range"),
    (("nodes", 0, "memory_bytes"), math.nan, "nodes[0].memory_bytes: nan is not a finite number"),
    (("nodes", 1, "name"), "node1", "nodes[1].name: 'node1' appears twice"),
    (("guests", 0, "node"), "node9", "guests[0].node: 'node9' is not a node of this snapshot"),
    (("guests", 1, "sid"), "vm:101", "guests[1].sid: 'vm:101' appears twice"),
    (("guests", 1, "sid"), "qemu/7", "guests[1].sid"),
    (("guests", 0, "state"), "dancing", "guests[0].state"),
    (("guests", 0, "state"), "migrate", "guests[0].target: a guest in state 'migrate' needs a target node"),
    (("guests", 0, "cpu_usage"), "lots", "guests[0].cpu_usage: 'lots' is not a finite number"),
    (("guests", 0, "ha"), 1, "guests[0].ha: 1 is not true or false"),
    (("rules", 0, "resources"), ["vm:101", "vm:999"], "rules[0].resources[1]: 'vm:999' is not a guest"),
    (("rules", 0, "affinity"), "maybe", "rules[0].affinity"),
    (("rules", 1, "nodes"), ["node7"], "rules[1].nodes[0].node: 'node7' is not a node"),
    (("nodes",), [], "nodes: a snapshot needs at least one node"),
]


@pytest.mark.parametrize(
    ("path", "value", "message"), BAD, ids=[".".join(map(str, b[0])) + "=" + repr(b[1]) for b in BAD]
)
def test_bad_snapshots_are_refused_naming_the_key_and_value(path, value, message):
    with pytest.raises(CrsError) as info:
        parse(with_change(path, value))
    assert message in str(info.value)


def test_rule_problems_are_rule_errors():
    with pytest.raises(RuleError):
        parse(with_change(("rules", 0, "resources"), ["vm:101"]))
    with pytest.raises(SnapshotError):
        parse(with_change(("guests", 0, "node"), KeyError))
