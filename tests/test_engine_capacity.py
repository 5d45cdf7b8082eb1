"""Capacity: how many more guests of a size fit (hspace's question), on hand-checked clusters."""

import pytest

from crs.capacity import Size, capacity, parse_size
from crs.errors import CrsError
from crs.fits import Limits
from crs.model import Guest, Node, NodeAffinityRule, Snapshot

GIB = 2**30


def cluster(rules=()):
    nodes = (Node("a", 8, 64 * GIB), Node("b", 4, 32 * GIB), Node("c", 16, 128 * GIB, maintenance=True))
    guests = (Guest("vm:1", "a", cores=4, memory_bytes=40 * GIB), Guest("vm:2", "b", cores=2, memory_bytes=8 * GIB))
    return Snapshot(nodes, guests, rules)


def test_sizes_read_like_hspace_specs():
    assert parse_size("4c,8g") == Size(4, 8 * GIB)
    assert parse_size("512m, 1c") == Size(1, 512 * 2**20)
    assert parse_size("2c,1t").memory_bytes == 2**40
    for bad in ("4c", "8g", "4x,8g", "0c,8g", "4c,8g,1c"):
        with pytest.raises(CrsError, match="cores and memory"):
            parse_size(bad)


def test_memory_bound_count_and_why_the_next_fails():
    got = capacity(cluster(), Size(1, 8 * GIB))
    # a: 24 GiB left → 3; b: 24 GiB left → 3; c is in maintenance and takes nothing
    assert got.per_node == {"a": 3, "b": 3} and got.count == 6
    assert got.limited_by == {"memory": 2, "cpu": 0, "n1": 0, "allowed": 0}


def test_cpu_bound_under_the_overcommit_ratio():
    got = capacity(cluster(), Size(8, 1 * GIB), Limits(cpu_overcommit=2.0))
    # a: 16 − 4 = 12 cores → 1; b: 8 − 2 = 6 → 0
    assert got.per_node == {"a": 1, "b": 0} and got.limited_by["cpu"] == 2


def test_the_reserve_is_kept_free_and_existing_overcommitment_is_reported():
    got = capacity(cluster(), Size(1, 8 * GIB), Limits(memory_reserve_bytes=8 * GIB))
    assert got.per_node == {"a": 2, "b": 2}
    over = capacity(cluster(), Size(1, GIB), Limits(cpu_overcommit=0.25))
    assert over.overcommitted == {"a": "cpu", "b": "cpu"} and over.count == 0


def test_like_a_guest_with_a_strict_node_rule():
    rule = NodeAffinityRule("only-b", ("vm:2",), (("b", 1),), strict=True)
    got = capacity(cluster((rule,)), Size(1, 8 * GIB), like="vm:2")
    assert got.per_node == {"b": 3} and got.limited_by == {"memory": 1, "cpu": 0, "n1": 0, "allowed": 1}


def test_tiered_starts_from_the_largest_guest_and_halves_what_refused_most():
    from crs.capacity import tiered

    tiers = tiered(cluster())
    assert tiers[0].size == Size(4, 40 * GIB) and tiers[0].count == 0  # 24 GiB left at most
    assert tiers[1].size == Size(4, 20 * GIB) and tiers[1].per_node == {"a": 1, "b": 1}
    assert tiers[2].size == Size(4, 10 * GIB) and tiers[2].per_node == {"a": 0, "b": 0}
    # 4 GiB left on each node (64 − 40 − 20, 32 − 8 − 20): 5 GiB none, 2.5 GiB one each (1.5 left),
    # 1.25 GiB one each (0.25 left), 0.625 GiB none; halving again would go below 512 MiB
    assert [t.count for t in tiers[3:]] == [0, 2, 2, 0] and tiers[-1].size == Size(4, 0.625 * GIB)


def test_n1_keeps_room_to_recover_any_one_node():
    nodes = tuple(Node(name, 16, 64 * GIB) for name in ("a", "b", "c"))
    guests = tuple(Guest(f"vm:{i}", name, cores=1, memory_bytes=16 * GIB) for i, name in enumerate("abc"))
    snap = Snapshot(nodes, guests)
    assert capacity(snap, Size(1, 16 * GIB)).count == 9  # 48 GiB free on each node
    safe = capacity(snap, Size(1, 16 * GIB), n1_safe=True)
    # 5 more leave 48, 48 and 32 GiB used: losing a 48 GiB node puts 16 GiB on the 48 and 32 on the 32;
    # a sixth fills every node to 48 GiB, and the 48 GiB of a lost node no longer fit in 2 × 16
    assert safe.count == 5 and sorted(safe.per_node.values()) == [1, 2, 2]
    assert safe.limited_by["n1"] == 3


def test_the_command_line_answers_in_crs_capacity_1(tmp_path, capsys):
    import json

    from crs.programs.cli import main
    from crs.snapshot import to_dict

    nodes = tuple(Node(name, 16, 64 * GIB) for name in ("a", "b", "c"))
    guests = tuple(Guest(f"vm:{i}", name, cores=1, memory_bytes=16 * GIB) for i, name in enumerate("abc"))
    path = tmp_path / "s.json"
    path.write_text(json.dumps(to_dict(Snapshot(nodes, guests))))
    assert main(["capacity", str(path), "--size", "1c,16g", "--n1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "crs-capacity/1" and out["n1"] and out["count"] == 5
    assert out["size"] == {"cores": 1, "memory_bytes": 16 * GIB} and out["limited_by"]["n1"] == 3
    with pytest.raises(SystemExit) as refused:  # no cores: argparse refuses the option, exit 2
        main(["capacity", str(path), "--size", "16g"])
    assert refused.value.code == 2
    assert "cores and memory" in capsys.readouterr().err
