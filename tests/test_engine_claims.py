"""Claims (crs.claims): what an approved or running move holds, and whose claim a start names."""

from engine_clusters import GIB, node, snapshot, vm

from crs.claims import ending, held, holder
from crs.decision import Move
from crs.usage import node_stats

# Three nodes of 8 CPUs and 16 GiB, memory kept free: 4 GiB; n3 empty, so it takes 12 GiB.
NODES = [node(n, 8, 16 * GIB) for n in ("n1", "n2", "n3")]
SETTINGS = {"preset": "product", "mode": "static", "memory_reserve_bytes": 4 * GIB}


def move(sid, source, target):
    return Move(sid, (sid,), source, target, 0.0, 0.0)


def cluster(*guests):
    return snapshot(NODES, guests, **SETTINGS)


def carried_memory(snap):
    return {s.name: s.mem / GIB for s in node_stats(snap, "static")}


def test_a_claimed_guest_counts_on_its_target_and_still_on_its_source():
    snap = cluster(vm("vm:101", "n1", memory_bytes=8 * GIB), vm("vm:102", "n2", memory_bytes=2 * GIB))
    claimed = held(snap, [move("vm:101", "n1", "n3")])
    assert carried_memory(snap) == {"n1": 8, "n2": 2, "n3": 0}
    assert carried_memory(claimed) == {"n1": 8, "n2": 2, "n3": 8}


def test_a_move_the_source_no_longer_shows_on_its_source_claims_nothing():
    snap = cluster(vm("vm:101", "n2", memory_bytes=8 * GIB))  # already moved elsewhere
    assert carried_memory(held(snap, [move("vm:101", "n1", "n3")])) == {"n1": 0, "n2": 8, "n3": 0}


def test_a_start_names_the_claim_that_fills_its_target():
    snap = cluster(
        vm("vm:101", "n1", memory_bytes=4 * GIB),
        vm("vm:102", "n1", memory_bytes=6 * GIB),
        vm("vm:103", "n2", memory_bytes=6 * GIB),
    )
    claims = [("migration 11", move("vm:101", "n1", "n3")), ("migration 12", move("vm:102", "n1", "n3"))]
    # n3 takes 12 GiB: vm:101's 4 and vm:102's 6 leave 2, too little for vm:103's 6.
    assert holder(snap, move("vm:103", "n2", "n3"), claims) == "n3's memory is claimed by migration 12"
    assert holder(snap, move("vm:103", "n2", "n3"), claims[:1]) == ""  # one claim leaves it room


def test_a_target_full_without_any_claim_names_none():
    snap = cluster(vm("vm:101", "n1", memory_bytes=4 * GIB), vm("vm:103", "n2", memory_bytes=14 * GIB))
    assert holder(snap, move("vm:103", "n2", "n3"), [("migration 11", move("vm:101", "n1", "n3"))]) == ""


def test_the_room_a_move_off_the_target_frees_is_offered_once_it_has_ended():
    snap = cluster(vm("vm:101", "n3", memory_bytes=8 * GIB), vm("vm:103", "n2", memory_bytes=6 * GIB))
    swap = move("vm:103", "n2", "n3")  # n3 takes 12 GiB: 8 carried leave 4, too little for 6
    claims = [("migration 11", move("vm:101", "n3", "n1")), ("migration 12", move("vm:102", "n1", "n2"))]
    [(name, ended)] = list(ending(snap, swap, claims))  # only the move leaving n3 frees room there
    assert name == "migration 11"
    assert carried_memory(ended) == {"n1": 8, "n2": 6, "n3": 0}
    assert carried_memory(held(ended, [c for _, c in claims])) == {"n1": 8, "n2": 6, "n3": 0}  # its claim is spent
