"""Locked guests stay put: no plan proposes one, a decided move of one waits, and the lock
round-trips through the snapshot format (issue 35 item 6)."""

import json
from dataclasses import replace

import pytest
from engine_clusters import GIB, node, snapshot, vm
from test_engine_pressure import SEED_UNITS, table_cluster

import crs.locks
from crs.balancer import run_round, stale_reason
from crs.decision import Move, RoundState
from crs.errors import CrsError
from crs.model import Settings
from crs.pressure import relief
from crs.snapshot import dumps, parse

ACT_NOW = {"threshold": 0.0, "hold_duration": 0, "margin": 0.0}


def crowded(locks):
    """Six guests on n0 of four nodes: a plan moves some of them."""
    guests = [vm(f"vm:{100 + i}", "n0", cpu=2.0, mem=8 * GIB, **locks.get(f"vm:{100 + i}", {})) for i in range(6)]
    nodes = [node(f"n{i}", 16, 64 * GIB) for i in range(4)]
    return snapshot(nodes, guests, mode="dynamic", preset="product", moves_per_round=5, **ACT_NOW)


@pytest.mark.parametrize("lock", ["backup", "snapshot", "clone", "suspended", "a-lock-proxmox-adds-later"])
def test_a_locked_guest_is_never_proposed_but_still_loads_its_node(lock):
    free = run_round(crowded({}), RoundState())
    moved = {sid for s in free.plan for sid in s.move.guests}
    assert moved  # unlocked, the plan moves some of them
    locked = crowded({sid: {"lock": lock} for sid in moved})
    result = run_round(locked, RoundState())
    assert result.plan and not {sid for s in result.plan for sid in s.move.guests} & moved
    assert result.node_loads == free.node_loads  # the locked guests still count toward n0's load


def test_migrate_is_no_lock_that_holds_a_guest():
    """`migrate` is a migration under way, shown by the state: the guest is judged as before."""
    assert run_round(crowded({"vm:100": {"lock": "migrate"}}), RoundState()).plan == (
        run_round(crowded({}), RoundState()).plan
    )


def test_pressure_passes_over_a_locked_guest_that_hurts():
    cluster = table_cluster()
    assert relief(cluster, SEED_UNITS).guest.sid == "vm:102"
    locked = replace(
        cluster, guests=tuple(replace(g, lock="backup") if g.sid == "vm:102" else g for g in cluster.guests)
    )
    found = relief(locked, SEED_UNITS)
    assert found is not None and found.guest.sid != "vm:102"
    by_pressure = replace(locked, settings=Settings(objective="pressure", containers="never"))
    assert "vm:102" not in {sid for s in run_round(by_pressure, RoundState()).plan for sid in s.move.guests}


def test_a_decided_move_of_a_guest_that_became_locked_waits_with_the_reason():
    move = Move("vm:100", ("vm:100",), "n0", "n1", 0.0, 0.1)
    cluster = crowded({"vm:100": {"lock": "backup"}})
    assert stale_reason(cluster, move) is None  # not expired: it only waits
    assert crs.locks.waits(cluster, move.guests) == "waits: vm:100 is locked: backup"
    assert crs.locks.waits(crowded({}), move.guests) == ""


@pytest.mark.parametrize(
    ("message", "lock"),
    [
        ("migrate vm:100 to node2: Proxmox answered 500 VM is locked (backup): {'message': 'x'}", "backup"),
        ("CT is locked (snapshot-delete)", "snapshot-delete"),
        ("VM is locked (migrate)", ""),  # another migration under way: no lock to wait for
        ("migration aborted", ""),
    ],
)
def test_proxmox_s_lock_refusal_is_told_from_other_failures(message, lock):
    assert crs.locks.refused(message) == lock


def test_the_lock_round_trips_and_a_file_without_it_means_none():
    cluster = crowded({"vm:101": {"lock": "backup"}})
    again = parse(json.loads(dumps(cluster)))
    assert again.guest("vm:101").lock == "backup" and again.guest("vm:100").lock == ""
    assert '"lock"' not in dumps(crowded({}))  # only written when there is one
    with pytest.raises(CrsError, match=r"guests\[0\]\.lock"):
        crowded({"vm:100": {"lock": ""}})
