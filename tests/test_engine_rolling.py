"""Rolling maintenance order and grouping (hroller), on a hand-checked cluster."""

from crs.fits import Limits
from crs.model import Guest, Node, Snapshot
from crs.rolling import Queued, breaks_n1, groups, n1_question, next_steps, order, recovery_targets

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


def one_guest_each(names: str, loaded: str) -> Snapshot:
    """Nodes of 10 GiB; one 4 GiB HA guest on each of `loaded`."""
    nodes = tuple(Node(name, 8, 10 * GIB) for name in names)
    return Snapshot(nodes, tuple(Guest(f"vm:{i}", n, cores=2, memory_bytes=4 * GIB) for i, n in enumerate(loaded)))


def test_a_step_that_breaks_n1_says_which_loss_fails():
    # x's guest goes to y (8 GiB there); losing y then sends 8 GiB onto z, which holds 4: 12 of 10 GiB
    three = one_guest_each("xyz", "xyz")
    assert breaks_n1(three, ["x"], Limits(0)) == (
        "with x in maintenance, N+1 fails: losing y overloads z to 120 % memory; losing z fails too"
    )
    # with a fourth, empty node every loss still finds 4 GiB free: nothing to flag
    assert breaks_n1(one_guest_each("wxyz", "xyz"), ["x"], Limits(0)) == ""
    assert breaks_n1(one_guest_each("wxyz", "xyz"), ["w"], Limits(0)) == ""


def test_the_next_step_asks_n1_of_the_snapshot_itself():
    # The question bound by the engine: x's group is flagged with breaks_n1's own warning; with
    # no snapshot yet there is nothing to flag and the group starts draining.
    three = one_guest_each("xyz", "xyz")
    queue = (Queued("x", 0, "waiting"),)
    flagged = next_steps(queue, {}, False, n1_question(three, Limits(0)))
    assert [(c.subject, c.after, c.details["warning"]) for c in flagged.changes] == [
        ("x", "flagged", breaks_n1(three, ["x"], Limits(0)))
    ]
    assert [(c.subject, c.after) for c in next_steps(queue, {}, False, n1_question(None, Limits(0))).changes] == [
        ("x", "draining")
    ]
