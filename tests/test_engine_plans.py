"""Plans of several moves, the settings that shape them, and the `proxmox` preset."""

import math
from dataclasses import replace

import pytest
from engine_clusters import GIB, node, snapshot, vm
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from crs import fits
from crs.balancer import apply_move, plan, run_round, stale_reason
from crs.decision import RoundState, total_gain
from crs.errors import SnapshotError
from crs.imbalance import NOISE, imbalance, truncated
from crs.model import PROXMOX, Guards
from crs.planner import limits_of
from crs.snapshot import parse, to_dict
from crs.usage import counted_nodes, node_loads, node_stats, usable_nodes

ACT_NOW = {"threshold": 0.0, "hold_duration": 0}


def crowded(count=40, **settings):
    """Many small guests on one of eight nodes: no single move gains much."""
    nodes = [node(f"node{i}", 64, 256 * GIB) for i in range(1, 9)]
    guests = [vm(f"vm:{100 + i}", "node1", cpu=1.0, mem=4 * GIB) for i in range(count)]
    return snapshot(nodes, guests, mode="dynamic", **settings)


def test_a_file_without_the_new_keys_means_the_proxmox_preset():
    snap = crowded()
    assert snap.settings == replace(PROXMOX, mode="dynamic")
    assert (snap.settings.moves_per_round, snap.settings.target, snap.settings.load_floor) == (1, 0.3, 0.0)
    assert limits_of(snap.settings) is None


def test_the_product_preset_plans_several_moves_below_the_threshold_and_checks_fits():
    s = crowded(preset="product").settings
    assert s.moves_per_round > 1 and s.target < s.threshold
    assert limits_of(s) == fits.Limits(memory_reserve_bytes=0.0, cpu_overcommit=4.0)
    assert crowded(preset="product", threshold=0.1).settings.target == 0.1  # never above the threshold


def test_settings_round_trip_through_the_file():
    snap = crowded(preset="product", moves_per_round=7, target_imbalance=None, load_floor=0.4, cpu_overcommit=2.5)
    assert parse(to_dict(snap)) == snap and parse(to_dict(snap)).settings.target == snap.settings.threshold


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"moves_per_round": 0}, "settings.moves_per_round: 0 is not a whole number 1.."),
        ({"target_imbalance": 0.4}, "settings.target_imbalance: 0.4 is out of range; must be >= 0 and <= 0.3"),
        ({"load_floor": 1.5}, "settings.load_floor: 1.5 is out of range; must be >= 0 and <= 1"),
        ({"objective": "calm"}, "settings.objective: 'calm' is not one of even, pressure, both"),
        ({"preset": "vmware"}, "settings.preset: 'vmware' is not one of proxmox, product"),
        ({"cpu_overcommit": 0}, "settings.cpu_overcommit: 0 is out of range; must be > 0"),
    ],
)
def test_bad_new_settings_are_refused_naming_the_key(settings, message):
    with pytest.raises(SnapshotError, match=message.replace("(", r"\(")):
        crowded(**settings)


def test_a_plan_clears_the_margin_where_no_single_move_does():
    single = run_round(crowded(margin=0.1, **ACT_NOW), RoundState())
    assert single.decision == "below-margin" and single.move.relative_gain < 0.1
    result = run_round(crowded(margin=0.1, moves_per_round=10, **ACT_NOW), RoundState())
    assert result.decision == "migrate" and len(result.plan) == 10
    assert result.move == result.plan[0].move and total_gain(result.plan) >= 0.1
    assert f"total gain of {total_gain(result.plan):.1%}" in result.explanation.reason
    assert result.explanation.relative_gain == total_gain(result.plan)


def test_a_plan_below_the_margin_is_not_proposed_and_says_by_how_much():
    result = run_round(crowded(margin=0.9, moves_per_round=3, **ACT_NOW), RoundState())
    assert result.decision == "below-margin"
    assert f"a total gain of {total_gain(result.plan):.1%}" in result.explanation.reason
    assert "less than the margin 90%" in result.explanation.reason


def test_the_product_proposes_no_move_that_gains_nothing_where_proxmox_does():
    nodes = [node("node1"), node("node2")]
    guests = [vm("vm:101", "node1")]  # moving it only mirrors the cluster
    proxmox = run_round(snapshot(nodes, guests, mode="dynamic", margin=0.0, **ACT_NOW), RoundState())
    assert proxmox.decision == "migrate" and proxmox.move.relative_gain == 0.0
    product = run_round(snapshot(nodes, guests, mode="dynamic", margin=0.0, preset="product", **ACT_NOW), RoundState())
    assert product.decision == "below-margin" and "float noise only" in product.explanation.reason


def test_a_plan_stops_at_the_target_imbalance():
    result = run_round(crowded(moves_per_round=100, threshold=0.3, target_imbalance=0.2, hold_duration=0), RoundState())
    afters = [s.imbalance_after for s in result.plan]
    assert afters[-1] <= 0.2 < afters[-2]


def test_below_the_load_floor_nothing_moves_and_the_page_says_why():
    busy = run_round(crowded(load_floor=0.6, **ACT_NOW), RoundState())  # node1 at 62.5 % CPU and memory
    assert busy.decision == "below-margin"
    quiet = run_round(crowded(count=10, load_floor=0.6, **ACT_NOW), RoundState(2))
    assert quiet.decision == "below-load-floor" and quiet.move is None and quiet.state.hold_count == 0
    assert quiet.explanation.reason == (
        "No move: the busiest node, node1, is at 15.6% (CPU 15.6%, memory 15.6%), below the load floor 60.0%."
    )


def test_fits_keeps_the_product_from_overfilling_a_node():
    nodes = [node("node1", 32, 64 * GIB), node("node2", 32, 32 * GIB), node("node3", 8, 64 * GIB)]
    guests = [
        vm("vm:101", "node1", memory_bytes=24 * GIB, cpu=6.0, mem=20 * GIB),
        vm("vm:102", "node1", memory_bytes=24 * GIB, cpu=6.0, mem=20 * GIB),
        vm("vm:103", "node2", memory_bytes=16 * GIB, cpu=0.1, mem=GIB, ha=False),
    ]
    proxmox = run_round(snapshot(nodes, guests, mode="dynamic", **ACT_NOW), RoundState())
    assert proxmox.move.target == "node2"  # 16 + 24 GiB configured on a 32 GiB node: Proxmox does not mind
    product = run_round(snapshot(nodes, guests, mode="dynamic", preset="product", **ACT_NOW), RoundState())
    assert product.move.target == "node3" and "node2" not in {s.move.target for s in product.plan}
    overfill = replace(proxmox.move, guests=("vm:101",))
    assert stale_reason(snapshot(nodes, guests, mode="dynamic"), overfill) is None
    assert stale_reason(snapshot(nodes, guests, mode="dynamic", preset="product"), overfill) == (
        "vm:101 no longer fits on node2: its configured memory would exceed what the node may carry"
    )


def test_a_node_whose_guests_fit_nowhere_says_which_limit_holds_them():
    """Every other node beyond its configured cores: the round names them and the limit
    instead of only "nothing to gain" while the busiest node is at 150 % of its CPU."""
    nodes = [node("node1", 4, 64 * GIB), node("node2", 4, 64 * GIB), node("node3", 4, 16 * GIB)]
    guests = [
        *(vm(f"vm:{100 + i}", "node1", cores=2, cpu=1.5) for i in range(4)),
        *(vm(f"vm:{200 + i}", "node2", cores=4, cpu=0.1) for i in range(4)),
        vm("vm:300", "node3", cores=2, memory_bytes=14 * GIB, cpu=0.1),
    ]
    full = run_round(snapshot(nodes, guests, mode="dynamic", preset="product", **ACT_NOW), RoundState())
    assert full.decision == "below-margin"
    assert full.explanation.reason.endswith(
        " No guest of the busiest node, node1, fits on another; full by configured cores: node2 16 (limit 16),"
        " at the CPU overcommit of 4 per CPU thread; memory: node3. Raise the limit, or add a node."
    )
    room = run_round(
        snapshot(nodes, guests, mode="dynamic", preset="product", cpu_overcommit=5, **ACT_NOW), RoundState()
    )
    assert room.decision == "migrate" and room.move.target == "node2"


# -- properties of every plan ------------------------------------------------------

guest_strategy = st.tuples(
    st.integers(0, 5), st.floats(0.1, 8.0), st.floats(0.1, 16.0), st.integers(0, 8), st.sampled_from([2, 4, 8, 16])
)


@hsettings(max_examples=60, deadline=None)
@given(
    caps=st.lists(st.tuples(st.integers(8, 64), st.sampled_from([32, 64, 128])), min_size=3, max_size=6),
    guests=st.lists(guest_strategy, min_size=2, max_size=20),
    mode=st.sampled_from(["static", "dynamic"]),
    method=st.sampled_from(["bruteforce", "topsis"]),
    preset=st.sampled_from(["proxmox", "product"]),
    budget=st.integers(1, 12),
    rules=st.booleans(),
    rest=st.integers(0, 3),
)
def test_plans_never_churn_report_true_figures_and_obey_rules_guards_and_fits(
    caps, guests, mode, method, preset, budget, rules, rest
):
    nodes = [node(f"n{i}", c, m * GIB) for i, (c, m) in enumerate(caps)]
    vms = [
        vm(f"vm:{100 + i}", f"n{n % (len(caps) - 1)}", cores=cores, memory_bytes=mcfg * GIB, cpu=cpu, mem=mem * GIB)
        for i, (n, cpu, mem, cores, mcfg) in enumerate(guests)
    ]
    placed = {v["sid"]: v["node"] for v in vms}
    same = [s for s in placed if placed[s] == placed["vm:100"]]
    rule_list = []
    if rules:
        rule_list.append({"id": "pin", "type": "node-affinity", "resources": ["vm:101"], "nodes": ["n0", "n1"]})
        rule_list.append({"id": "apart", "type": "resource-affinity", "resources": ["vm:100", "vm:101"]})
        rule_list[-1]["affinity"] = "negative"
        if len(same) > 1 and "vm:101" not in same:
            rule_list.append(
                {"id": "together", "type": "resource-affinity", "resources": same[:2], "affinity": "positive"}
            )
    snap = snapshot(
        nodes, vms, rule_list, mode=mode, method=method, preset=preset, moves_per_round=budget, margin=0.0, **ACT_NOW
    )
    guards = Guards(
        in_cooldown=frozenset(f"vm:{102 + i}" for i in range(rest)),
        barred=frozenset({("vm:104", f"n{len(caps) - 1}")}),
    )
    result = run_round(snap, RoundState(), guards=guards)
    # the last node is empty: a loaded cluster always has a best move, unless rules and guests in cooldown
    # pin everything (e.g. a pinned guest kept apart from the bundle that rests on its only other node)
    assert result.plan or (rules and rest), "an unconstrained loaded cluster always has a best move"
    if not result.plan:
        assert result.decision == "no-candidate"
        return
    assert len(result.plan) <= budget
    limits = limits_of(snap.settings)
    current, moved = snap, set()
    as_if = {s.name: (s.cpu, s.mem) for s in node_stats(snap, mode)}  # Proxmox's node sums, moved by subtraction
    for k, step in enumerate(result.plan):
        move = step.move
        assert step.after == (k - 1 if k else None)
        assert moved.isdisjoint(move.guests), "no guest moves twice, so none goes back where it came from"
        assert stale_reason(current, move, guards) is None, "each step is legal where it is taken"
        for alternative in step.alternatives:  # a claim that finds its target full may take one instead
            assert stale_reason(current, replace(move, target=alternative), guards) is None
        if limits is not None:
            target = current.node(move.target)
            here = [g for g in current.guests if move.target in counted_nodes(g, frozenset(usable_nodes(current)))]
            commitment = fits.committed(target, here)
            for sid in move.guests:
                commitment = commitment.plus(current.guest(sid), target)
            assert fits.refusal(target, commitment, limits) is None
        before = _figure(current, as_if if preset == "proxmox" else None)
        assert step.imbalance_before == (before if k == 0 else truncated(before))
        current = _carry(as_if, current, move)
        direct = _figure(current, as_if if preset == "proxmox" else None)
        assert step.imbalance_after == move.imbalance_after == truncated(direct)
        assert step.gain == move.relative_gain == pytest.approx((step.imbalance_before - direct) / before, abs=1e-12)
        if k:
            assert step.gain > NOISE
        assert move.target not in step.alternatives and move.source not in step.alternatives
        moved.update(move.guests)
    product = math.prod(1.0 - s.gain for s in result.plan)
    assert 1.0 - total_gain(result.plan) == pytest.approx(product, abs=1e-12)
    assert total_gain(result.plan) == pytest.approx(
        (result.imbalance - result.plan[-1].imbalance_after) / result.imbalance, abs=1e-12
    )


def test_plan_steps_previews_the_planner_beside_the_greedy_sequence():
    snap = crowded(margin=0.0, **ACT_NOW)
    result = plan(snap, steps=12)
    assert len(result.plan) == 12 and result.moves  # the greedy `moves` keep their meaning
    assert len({s.move.leader for s in result.plan}) == 12
    assert all(s.alternatives for s in result.plan)


def _figure(snap, as_if=None):
    """The imbalance: `proxmox` of the sums Proxmox carries from move to move, `product` counted
    again from the moved snapshot, as the next round sees it."""
    if as_if is None:
        return imbalance(list(node_loads(snap, snap.settings.mode).values()), snap.settings.imbalance_scale)
    loads = [
        (cpu / snap.node(name).cpus + mem / snap.node(name).memory_bytes) / 2.0 for name, (cpu, mem) in as_if.items()
    ]
    return imbalance(loads, snap.settings.imbalance_scale)


def _carry(as_if, snap, move):
    """`snap` after `move`, and Proxmox's sums moved with it: the guests' summed configured
    (static) or measured (dynamic) size off the source, at least 0, and onto the target."""
    cpu = mem = 0.0
    for sid in move.guests:
        g = snap.guest(sid)
        cpu += g.cores if snap.settings.mode == "static" else g.cpu_usage
        mem += g.memory_bytes if snap.settings.mode == "static" else g.mem_usage_bytes
    source, target = as_if[move.source], as_if[move.target]
    as_if[move.source] = (max(0.0, source[0] - cpu), max(0.0, source[1] - mem))
    as_if[move.target] = (target[0] + cpu, target[1] + mem)
    return apply_move(snap, move)
