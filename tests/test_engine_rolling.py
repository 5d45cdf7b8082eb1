"""Rolling maintenance order and grouping (hroller), on a hand-checked cluster."""

from crs.model import Guest, Node, Snapshot
from crs.rolling import groups, order, recovery_targets

GIB = 2**30


def cluster():
    nodes = tuple(Node(name, 16, 64 * GIB) for name in "abcd")
    placement = {"a": 1, "b": 2, "c": 0, "d": 3}
    guests = tuple(
        Guest(f"vm:{ord(n)}{k}", n, cores=2, memory_bytes=4 * GIB)
        for n, count in placement.items()
        for k in range(count)
    )
    return Snapshot(nodes, guests)


def test_fewest_and_smallest_guests_first():
    assert order(cluster()) == ["c", "a", "b", "d"]
    assert order(cluster(), ("d", "a")) == ["a", "d"]


def test_recovery_goes_to_the_emptiest_node():
    assert recovery_targets(cluster(), "b") == {"c"} and recovery_targets(cluster(), "c") == set()


def test_nodes_share_a_step_only_when_neither_recovers_onto_the_other():
    # every node's guests would be recovered onto c, so c goes alone; a and b may go together
    assert groups(cluster(), size=2) == [["c"], ["a", "b"], ["d"]]
    assert groups(cluster()) == [["c"], ["a"], ["b"], ["d"]]
