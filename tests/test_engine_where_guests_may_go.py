"""Moves, plans and placements never leave a guest's allowed nodes or required traits."""

from engine_clusters import GIB, node, snapshot, vm
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from crs.balancer import run_round
from crs.decision import RoundState
from crs.placement import select_node

ACT_NOW = {"threshold": 0.0, "hold_duration": 0, "margin": 0.0}


def cluster(extra_by_sid, moves=5, gpu_nodes=("n2",)):
    nodes = [node(f"n{i}", 16, 64 * GIB, **({"traits": ["gpu"]} if f"n{i}" in gpu_nodes else {})) for i in range(4)]
    guests = [
        vm(f"vm:{100 + i}", "n0", cpu=2.0, mem=8 * GIB, **extra_by_sid.get(f"vm:{100 + i}", {})) for i in range(6)
    ]
    return snapshot(nodes, guests, mode="dynamic", preset="product", moves_per_round=moves, **ACT_NOW)


def test_a_pinned_guest_is_never_planned_and_a_gpu_guest_only_to_gpu_nodes():
    pinned = {"allowed_nodes": ["n0"], "pinned_reason": "local disk local-lvm:vm-100-disk-0"}
    extra = {f"vm:{100 + i}": pinned for i in range(5)} | {"vm:105": {"requires": ["gpu"]}}
    result = run_round(cluster(extra), RoundState())
    assert [s.move.leader for s in result.plan] == ["vm:105"] and result.plan[0].move.target == "n2"
    assert set(result.plan[0].alternatives) == set()  # no other gpu node


def test_placement_honours_forbidden_traits():
    snap = cluster({"vm:100": {"requires": ["!gpu"], "allowed_nodes": ["n0", "n2", "n3"]}})
    assert select_node(snap, "vm:100") == "n3"  # n1 not allowed, n2 forbidden by trait, n0 crowded


def test_no_plan_step_leaves_allowed_nodes_or_traits():
    """A property over the plan's steps: it proves something only if the examples have steps."""
    steps = []

    @hsettings(max_examples=40, deadline=None)
    @given(
        st.lists(st.tuples(st.sets(st.sampled_from(["n0", "n1", "n2", "n3"])), st.booleans()), min_size=6, max_size=6)
    )
    def every_step_stays_allowed(constraints):
        extra = {}
        for i, (allowed, gpu) in enumerate(constraints):
            extra[f"vm:{100 + i}"] = ({"allowed_nodes": sorted(allowed | {"n0"})} if allowed else {}) | (
                {"requires": ["gpu"]} if gpu else {}
            )
        snap = cluster(extra, moves=6, gpu_nodes=("n2", "n3"))
        guests = {g.sid: g for g in snap.guests}
        nodes = {n.name: n for n in snap.nodes}
        plan = run_round(snap, RoundState()).plan
        steps.append(len(plan))
        for step in plan:
            for target in (step.move.target, *step.alternatives):
                assert all(guests[sid].may_run_on(nodes[target]) for sid in step.move.guests)

    every_step_stays_allowed()
    assert sum(1 for n in steps if n) >= len(steps) // 2, steps  # most examples planned moves
