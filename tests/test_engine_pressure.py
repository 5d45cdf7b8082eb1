"""The pressure policy against the VM-centric series' own worked examples (reference: the
series' AHP and TOPSIS examples and the bad-guest table, reproduced independently)."""

from dataclasses import replace

import numpy as np
import pytest

from crs import ahp, topsis
from crs.errors import CrsError
from crs.model import Guest, Node, Pressure, Settings, Snapshot
from crs.pressure import CRITERIA, PREFERENCES, WEIGHTS, Limits, hurting, ranked, relief

GIB = 2**30


def test_ahp_of_the_two_criteria_example():
    w = ahp.weights(("cpu", "mem"), {("mem", "cpu"): 2})
    assert w.of("cpu") == pytest.approx(1 / 3) and w.of("mem") == pytest.approx(2 / 3)
    assert w.lambda_max == pytest.approx(2) and w.consistency_ratio == pytest.approx(0)


def test_ahp_of_the_series_bad_guest_table():
    """Principal eigenvector, λ_max and the consistency ratio of the seed's five-criteria table."""
    assert WEIGHTS.weights == pytest.approx((0.670942181, 0.153003670, 0.088173081, 0.036321209, 0.051559859))
    assert WEIGHTS.criteria == CRITERIA
    assert WEIGHTS.lambda_max == pytest.approx(5.413972546)
    assert WEIGHTS.consistency_ratio == pytest.approx(0.092404586) and WEIGHTS.consistent


def test_ahp_refuses_a_table_with_a_missing_pair_or_off_scale_value():
    with pytest.raises(CrsError, match="exactly once"):
        ahp.weights(("a", "b", "c"), {("a", "b"): 2, ("a", "c"): 3})
    with pytest.raises(CrsError, match="1/9"):
        ahp.weights(("a", "b"), {("a", "b"): 12})
    assert len(PREFERENCES) == 10


def test_topsis_scores_of_the_series_node_example():
    """cpu lower is better, memory higher is better, weights 1/3 and 2/3: the printed scores."""
    matrix = np.array([[80, 100], [79, 99], [90, 102]], dtype=float)
    assert topsis.scores(matrix, (-1 / 3, 2 / 3)) == pytest.approx(
        [0.745400652669653, 0.688707427881571, 0.311292572118429], abs=1e-15
    )


def started(sid, node, mem_gib, cpu_pressure, total_cpu, uptime=3600.0):
    return Guest(
        sid,
        node,
        cores=4,
        memory_bytes=32 * GIB,
        cpu_usage=total_cpu / 100,
        mem_usage_bytes=mem_gib * GIB,
        pressure=Pressure(cpu_some=cpu_pressure),
        uptime_s=uptime,
    )


def table_cluster(**node1):
    nodes = (
        Node("node1", 64, 100 * GIB, mem_usage_bytes=90 * GIB, ksm_bytes=10 * GIB, **node1),
        Node("node2", 64, 100 * GIB, mem_usage_bytes=50 * GIB),
    )
    guests = (
        started("vm:101", "node1", 8, 0.10, 150),
        started("vm:102", "node1", 4, 0.80, 300),
        started("vm:103", "node1", 20, 0.05, 50),
        started("vm:104", "node1", 2, 0.95, 100, uptime=200),
        started("ct:105", "node1", 2, 0.95, 100),
        started("vm:201", "node2", 16, 0.90, 400),
        started("vm:202", "node2", 4, 0.75, 100),
    )
    return Snapshot(nodes, guests)


SEED_UNITS = Limits(cpu=0.75)  # the series' table compares with 0.75 as a plain number


def test_bad_guests_of_the_series_table():
    bad = {g.sid: g for g in hurting(table_cluster(), SEED_UNITS)}
    assert set(bad) == {"vm:101", "vm:102", "vm:103", "vm:201"}  # 104 too young, 105 a CT, 202 at the edge
    assert bad["vm:101"].memory_pressure == pytest.approx(5 / 8)
    assert bad["vm:102"].memory_pressure == 0  # leaving alone would not bring node1 under 85 GiB
    assert bad["vm:103"].memory_pressure == pytest.approx(5 / 20)
    assert bad["vm:201"].memory_pressure == 0 and bad["vm:201"].cpu_pressure == 0.90


def test_series_ranking_and_scores():
    order = ranked(hurting(table_cluster(), SEED_UNITS))
    assert [g.sid for g, _ in order] == ["vm:201", "vm:102", "vm:101", "vm:103"]
    assert [s for _, s in order] == pytest.approx([0.549533, 0.541335, 0.460849, 0.250236], abs=1e-6)


def test_the_guest_moved_last_is_skipped_and_the_rest_rescored():
    order = ranked(hurting(table_cluster(), SEED_UNITS, last_moved="vm:201"))
    assert [g.sid for g, _ in order] == ["vm:102", "vm:101", "vm:103"]
    assert [s for _, s in order] == pytest.approx([0.630484, 0.399144, 0.214442], abs=1e-6)


def test_ksm_lowers_the_memory_limit_to_80_percent():
    nodes = (Node("n", 64, 100 * GIB, mem_usage_bytes=82 * GIB, ksm_bytes=25 * GIB),)
    guests = (started("vm:301", "n", 4, 0, 10), started("vm:302", "n", 1, 0, 10))
    bad = {g.sid: g for g in hurting(Snapshot(nodes, guests), Limits())}
    assert bad["vm:301"].memory_pressure == pytest.approx(0.5) and bad["vm:302"].memory_pressure == 0
    nodes = (Node("n", 64, 100 * GIB, mem_usage_bytes=82 * GIB, ksm_bytes=20 * GIB),)  # not more than 20 %
    assert hurting(Snapshot(nodes, guests), Limits()) == ()


def test_containers_hurt_only_when_restarts_are_allowed():
    snapshot = table_cluster()
    assert "ct:105" in {g.sid for g in hurting(snapshot, Limits(cpu=0.75, containers=True))}


def test_a_rule_breach_ranks_first_even_without_pressure():
    order = ranked(hurting(table_cluster(), SEED_UNITS, breaking=frozenset({"vm:202"})))
    assert order[0][0].sid == "vm:202" and order[0][0].reasons == ("breaks an affinity rule",)


def test_relief_moves_the_first_hurting_guest_to_a_node_that_stays_under_its_limits():
    move = relief(table_cluster(), SEED_UNITS)
    # node1 is over its memory limit: nothing may land there, so vm:201 (on node2) has no target,
    # and the next guest, vm:102 from node1, goes to node2.
    assert (move.guest.sid, move.target) == ("vm:102", "node2")
    assert move.relief == pytest.approx(0.80) and "stalls on CPU" in move.reason


def test_no_relief_when_every_other_node_would_cross_its_memory_limit():
    nodes = (Node("a", 64, 100 * GIB, mem_usage_bytes=90 * GIB), Node("b", 64, 100 * GIB, mem_usage_bytes=84 * GIB))
    guests = (started("vm:1", "a", 8, 0, 10), started("vm:2", "b", 1, 0, 10))
    assert relief(Snapshot(nodes, guests), Limits()) is None  # 84 + 8 > 85 GiB on b
    roomy = (nodes[0], Node("b", 64, 100 * GIB, mem_usage_bytes=70 * GIB))
    assert relief(Snapshot(roomy, guests), Limits()).target == "b"  # 70 + 8 ≤ 85 GiB


def test_objective_pressure_moves_the_guest_that_hurts_and_says_so():
    from crs.balancer import run_round
    from crs.decision import RoundState

    snapshot = replace(table_cluster(), settings=Settings(objective="pressure", containers="never"))
    result = run_round(snapshot, RoundState())
    assert result.decision == "migrate" and result.move.objective == "pressure"
    assert (result.move.leader, result.move.target) == ("vm:102", "node2")  # limit 0.10: vm:201 has no target
    assert result.move.to_dict()["relief"] == pytest.approx(0.80) and "AHP weights" in result.explanation.reason
    calm = replace(
        snapshot,
        guests=tuple(replace(g, pressure=None) for g in snapshot.guests),
        nodes=tuple(replace(n, pressure=None) for n in snapshot.nodes),
    )
    assert run_round(calm, RoundState()).decision == "no-pressure-data"
    even = replace(snapshot, settings=Settings(objective="even", threshold=0.0, hold_duration=0))
    assert run_round(even, RoundState()).move.to_dict().get("objective") is None


def test_objective_both_falls_back_to_evenness_when_nothing_hurts():
    from crs.balancer import run_round
    from crs.decision import RoundState

    quiet = replace(
        table_cluster(),
        guests=tuple(replace(g, pressure=Pressure()) for g in table_cluster().guests),
        nodes=tuple(replace(n, mem_usage_bytes=10 * GIB) for n in table_cluster().nodes),
        settings=Settings(objective="both", threshold=0.0, hold_duration=0, margin=0.0),
    )
    result = run_round(quiet, RoundState())
    assert result.decision == "migrate" and result.move.objective == "even"


def test_objective_both_stops_its_evenness_plan_halfway_to_the_target():
    """24 equal guests crowd one of four equal nodes; nothing stalls. `even` plans down to the
    target 20 % (15 moves, the last from 22.6 % to 16.7 %); `both` stops at the first step under
    25 %, halfway from the target to the threshold 30 %: one migration fewer, and it says so."""
    from engine_clusters import node, snapshot, vm

    from crs.balancer import run_round
    from crs.decision import RoundState

    quiet = {"cpu_some": 0.0, "memory_some": 0.0}
    guests = [vm(f"vm:{100 + i}", "a", mem=GIB, pressure=quiet) for i in range(24)]

    def planned(objective):
        nodes = [node(n) for n in "abcd"]
        settings = {"mode": "dynamic", "preset": "product", "hold_duration": 0, "moves_per_round": 20}
        return run_round(snapshot(nodes, guests, objective=objective, **settings), RoundState())

    even, both = planned("even"), planned("both")
    assert even.decision == both.decision == "migrate"
    assert [s.move for s in both.plan] == [s.move for s in even.plan][:14]
    assert even.plan[-1].imbalance_after <= 0.2 < even.plan[-2].imbalance_after
    assert both.plan[-1].imbalance_after <= 0.25 < both.plan[-2].imbalance_after
    assert "target 25.0%" in both.explanation.reason and "target 20.0%" in even.explanation.reason
