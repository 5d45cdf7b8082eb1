"""Power (hsqueeze): which nodes can sleep, which standby nodes to wake, on hand-checked clusters."""

from crs.capacity import Size
from crs.model import Guest, Node, Snapshot
from crs.power import squeeze

GIB = 2**30
STANDARD = Size(1, 8 * GIB)


def cluster(counts, standby=()):
    nodes = tuple(Node(f"n{i + 1}", 16, 64 * GIB) for i in range(len(counts))) + tuple(
        Node(name, 16, 64 * GIB, online=False) for name in standby
    )
    guests = tuple(
        Guest(f"vm:{i}{k}", f"n{i + 1}", cores=1, memory_bytes=8 * GIB) for i, n in enumerate(counts) for k in range(n)
    )
    return Snapshot(nodes, guests)


def test_emptiest_nodes_sleep_while_every_other_keeps_room_for_two():
    got = squeeze(cluster([3, 2, 1, 1]), STANDARD)
    # n3 (1 guest) → n4 (most memory free); n4's two guests → n2, then n2 (48 vs 40 GiB free, then a tie
    # broken by name); n2 would leave n1 with room for one: it stays on, and so does n1.
    assert got.power_off == ("n3", "n4")
    assert set(got.moves) == {("vm:20", "n3", "n2"), ("vm:30", "n4", "n2")}
    assert got.watts_saved({"n3": 90.0}, default=120.0) == 210.0


def test_no_node_sleeps_when_the_rest_would_have_no_room():
    assert squeeze(cluster([6, 6]), STANDARD).power_off == ()


def test_standby_nodes_wake_in_order_when_room_runs_short():
    got = squeeze(cluster([7, 7], standby=("s1", "s2")), STANDARD, standby=("s1", "s2"))
    # n1 and n2 have room for 1 each, 2 short in all; s1 brings room for 8 − 2 = 6 more than needed
    assert got.power_on == ("s1",) and got.power_off == ()
