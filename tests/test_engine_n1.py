"""N+1: each node lost in turn, its HA guests recovered as Proxmox recovers them, the
capacity rule applied to what the other nodes then hold. Clusters checked by hand."""

import json
from dataclasses import replace

import pytest
from engine_clusters import GIB, node, snapshot, vm
from proxmox_replay import FIXTURES, Manager, load

from crs.fits import Limits
from crs.n1 import lose, n1
from crs.programs.cli import main


def cluster(guests_per_node=3, memory_gib=32, rules=(), extra=()):
    """Three equal nodes, each holding `guests_per_node` HA guests of 8 GiB and 2 cores."""
    nodes = [node(f"node{i}", cpus=8, memory_bytes=memory_gib * GIB) for i in (1, 2, 3)]
    guests = [
        vm(f"vm:{i}{j}", f"node{i}", cores=2, memory_bytes=8 * GIB) for i in (1, 2, 3) for j in range(guests_per_node)
    ]
    return snapshot(nodes, [*guests, *extra], rules, mode="static")


def test_a_cluster_with_room_survives_the_loss_of_any_node():
    report = n1(cluster(guests_per_node=2, memory_gib=64))
    assert report.survives
    assert report.verdict == "survives the loss of any one node"
    loss = report.losses[0]
    assert [(r.sid, r.target) for r in loss.recoveries] == [("vm:10", "node2"), ("vm:11", "node3")]
    assert {load.node: load.memory_bytes / GIB for load in loss.loads} == {"node2": 24, "node3": 24}


def test_a_cluster_built_to_fail_names_the_node_and_the_overload():
    """Each 32 GiB node holds 24 GiB. node1's three 8 GiB guests go node2, node3, node2
    (equal nodes tie by name, then the emptier one wins): node2 holds 40 GiB = 125 %."""
    report = n1(cluster())
    assert not report.survives
    first = report.losses[0]
    assert [r.target for r in first.recoveries] == ["node2", "node3", "node2"]
    assert [(load.node, load.refusal, round(load.memory, 2)) for load in first.overloaded] == [
        ("node2", "memory", 1.25)
    ]
    assert report.verdict == "losing node1 overloads node2 to 125 % memory; losing node2 or node3 fails too"


def test_the_memory_reserve_and_cpu_overcommit_decide_what_fits():
    assert n1(cluster(memory_gib=40)).survives  # node2 would hold exactly 40 GiB: it still fits
    assert n1(cluster(memory_gib=40), Limits(memory_reserve_bytes=1 * GIB)).losses[0].overloaded[0].node == "node2"
    cpu_bound = n1(cluster(memory_gib=64), Limits(cpu_overcommit=1.0))  # 8 CPUs, 5 guests × 2 cores after
    assert cpu_bound.verdict.startswith("losing node1 overloads node2 to 125 % CPU")


def test_a_guest_pinned_to_the_lost_node_finds_no_node():
    rules = [{"id": "pin", "type": "node-affinity", "resources": ["vm:10"], "nodes": ["node1"], "strict": True}]
    report = n1(cluster(guests_per_node=1, memory_gib=64, rules=rules))
    assert report.losses[0].lost == ("vm:10",)
    assert report.losses[0].recoveries[0].why_lost == "no node allowed"
    assert report.verdict == "losing node1 leaves vm:10 with no node"


def test_negative_partners_on_every_other_node_leave_a_guest_with_no_node():
    rules = [
        {"id": "apart", "type": "resource-affinity", "resources": ["vm:10", "vm:20", "vm:30"], "affinity": "negative"}
    ]
    assert n1(cluster(guests_per_node=1, memory_gib=64, rules=rules)).losses[0].lost == ("vm:10",)


def test_a_guest_that_cannot_be_recovered_counts_as_lost_not_placed():
    snap = cluster(guests_per_node=1, memory_gib=64)
    pinned = snap.guest("vm:10")
    snap = replace(
        snap,
        guests=tuple(replace(g, recoverable=False) if g is pinned else g for g in snap.guests),
    )
    loss = lose(snap, "node1")
    assert loss.lost == ("vm:10",) and loss.recoveries[0].why_lost == "not recoverable"
    assert {load.node: load.memory_bytes / GIB for load in loss.loads} == {"node2": 8, "node3": 8}


def test_guests_outside_ha_stay_down_and_stopped_ones_hold_nothing():
    extra = [
        vm("vm:90", "node1", memory_bytes=30 * GIB, ha=False),
        vm("vm:91", "node1", memory_bytes=30 * GIB, state="stopped"),
    ]
    loss = lose(cluster(guests_per_node=1, memory_gib=32, extra=extra), "node1")
    assert loss.down == ("vm:90",)
    assert dict((r.sid, r.target) for r in loss.recoveries) == {"vm:10": "node2", "vm:91": "node3"}
    assert loss.survived and loss.lost == ()


@pytest.mark.parametrize(
    "name", ["proxmox-crs-static1-recovery", "proxmox-crs-dynamic1-recovery", "proxmox-basic1-recovery-count"]
)
def test_recoveries_are_where_proxmox_recovers(name):
    """Proxmox's own tests of a node failure: N+1's loss of that node recovers alike."""
    fixture = load(FIXTURES / f"{name}.json")
    manager = Manager(fixture)
    for service in manager.services.values():
        service.state = {"disabled": "stopped"}.get(service.state, service.state)
    loss = lose(manager.snapshot(), fixture["event"]["node"])
    moved = {r.sid: r.target for r in loss.recoveries}
    assert moved and moved == {sid: fixture["expected"][sid] for sid in moved}


def test_the_command_line_prints_each_loss_and_the_verdict(tmp_path, capsys):
    nodes = [node(f"node{i}", cpus=8, memory_bytes=32 * GIB) for i in (1, 2, 3)]
    guests = [vm(f"vm:{i}{j}", f"node{i}", cores=2, memory_bytes=8 * GIB) for i in (1, 2, 3) for j in range(3)]
    path = tmp_path / "cluster.json"
    document = {"format": "crs-snapshot/1", "settings": {"mode": "static"}, "nodes": nodes, "guests": guests}
    path.write_text(json.dumps(document))
    assert main(["n1", str(path)]) == 0
    out = capsys.readouterr().out
    assert "losing node1: overloads node2 to 125 % memory (vm:10 -> node2, vm:11 -> node3, vm:12 -> node2)" in out
    assert main(["n1", str(path), "--json", "--memory-reserve", str(0)]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["survives"] is False and body["losses"][0]["overloaded"][0]["node"] == "node2"


def recovered_one_by_one(snap, failed):
    """The oracle: Proxmox's recovery as the manager runs it, the whole cluster re-summed
    before each placement (`select_node` on a fresh snapshot), as `crs.n1` did before it kept
    its occupancy up to date incrementally."""
    from crs.placement import select_node

    after = snap.with_nodes(tuple(replace(n, online=False) if n.name == failed else n for n in snap.nodes))
    stranded = sorted((g for g in snap.guests if g.node == failed and g.ha), key=lambda g: g.sid)
    stranded = [g for g in stranded if g.state not in ("disabled", "ignored")]
    ids = {g.sid for g in stranded}
    after = replace(after, guests=tuple(replace(g, state="recovery") if g.sid in ids else g for g in after.guests))
    targets = []
    for guest in stranded:
        target = select_node(after, guest.sid, "best-score") if guest.recoverable else None
        targets.append(target)
        if target is not None:
            state = "started" if guest.state != "stopped" else "request_stop"
            placed = replace(guest, node=target, state=state, running=False)
            after = replace(after, guests=tuple(placed if g.sid == guest.sid else g for g in after.guests))
    return targets


def random_cluster(seed, nodes):
    import random

    rng = random.Random(seed)
    names = [f"node{i:02d}" for i in range(nodes)]
    guests = []
    for i in range(nodes * 6):
        home = rng.choice(names)
        state = rng.choice(["started"] * 6 + ["stopped", "migrate", "disabled"])
        extra = {"state": state, "recoverable": rng.random() > 0.05}
        if state == "migrate":
            extra["target"] = rng.choice([n for n in names if n != home])
        guests.append(
            vm(
                f"vm:{100 + i}",
                home,
                cores=rng.choice([1, 2, 4, 0]),
                memory_bytes=rng.uniform(1, 16) * GIB,
                cpu=rng.uniform(0.1, 3.0),
                mem=rng.uniform(0.5, 12) * GIB,
                **extra,
            )
        )
    rules = [
        {"id": "apart", "type": "resource-affinity", "resources": ["vm:100", "vm:101"], "affinity": "negative"},
        {"id": "pin", "type": "node-affinity", "resources": ["vm:102"], "nodes": names[:2], "strict": True},
    ]
    node_list = [node(n, cpus=rng.choice([16, 32, 64]), memory_bytes=rng.uniform(64, 256) * GIB) for n in names]
    return snapshot(node_list, guests, rules, mode=rng.choice(["static", "dynamic"]))


@pytest.mark.parametrize("fast", [False, True], ids=["exact fold", "O(1) criteria"])
@pytest.mark.parametrize("seed", range(12))
def test_incremental_recovery_places_every_guest_where_re_summing_the_cluster_does(seed, fast, monkeypatch):
    """N+1 keeps placement's occupancy up to date guest by guest (and past the exact fold's
    budget scores in O(1) per node): it must recover every guest of every loss to the node
    the manager's own one-at-a-time placement picks, on random clusters with moving,
    stopped, disabled and unrecoverable guests and rules."""
    import crs.n1

    if fast:
        monkeypatch.setattr(crs.n1, "EXACT_TOPSIS_CELLS", 0)
    snap = random_cluster(seed, nodes=4 + seed % 5)
    report = n1(snap)
    assert report.losses, "every usable node is lost in turn"
    for loss in report.losses:
        assert [r.target for r in loss.recoveries] == recovered_one_by_one(snap, loss.node)
    from crs.n1 import survives

    assert survives(snap) == report.survives
