"""Measured pressure beats the model: where a node stalls with idle threads, core counts
cannot say what a move relieves, so the guest's measured stall decides (the seed's rule)."""

from dataclasses import replace

from test_engine_pressure_net_relief import saturated  # 4 guests of 2 cores stalling on 4 threads

from crs.balancer import run_round
from crs.decision import RoundState
from crs.model import Guest, Node, Pressure, Settings, Snapshot

GIB = 2**30


def stalling_with_idle_threads() -> Snapshot:
    """vm:1 stalls 92 % of the time on a, which itself reports 50 % with 3 of its 16 threads in
    use; b is idle at 0 % pressure and has the room."""
    node_stall = Pressure(cpu_some=0.5)
    nodes = (
        Node("a", 16, 64 * GIB, cpu_usage=3.0, mem_usage_bytes=6 * GIB, pressure=node_stall),
        Node("b", 16, 64 * GIB, cpu_usage=0.0, mem_usage_bytes=0.0, pressure=Pressure(cpu_some=0.0)),
    )
    guests = (
        Guest(
            "vm:1",
            "a",
            cores=2,
            memory_bytes=4 * GIB,
            cpu_usage=1.0,
            mem_usage_bytes=2 * GIB,
            pressure=Pressure(cpu_some=0.92),
        ),
        Guest(
            "vm:2",
            "a",
            cores=4,
            memory_bytes=4 * GIB,
            cpu_usage=2.0,
            mem_usage_bytes=4 * GIB,
            pressure=Pressure(cpu_some=0.05),
        ),
    )
    return Snapshot(nodes, guests, settings=Settings(objective="pressure"))


def test_a_guest_stalling_on_a_node_with_idle_threads_moves_to_the_idle_node():
    result = run_round(stalling_with_idle_threads(), RoundState())
    assert result.decision == "migrate"
    assert [(s.move.guests, s.move.source, s.move.target) for s in result.plan] == [(("vm:1",), "a", "b")]
    assert result.move.pressure_before == 0.92
    reason = result.explanation.reason
    assert "vm:1 on a hurts: stalls on CPU 92% of the time (limit 10%). Moving it to b" in reason
    assert "measured stall: a has 3.0 of 16 threads in use, so core counts do not explain it" in reason


def test_under_both_the_measured_stall_moves_it_too():
    snap = stalling_with_idle_threads()
    result = run_round(snap.with_settings(Settings(objective="both")), RoundState())
    assert result.decision == "migrate" and result.move.objective == "pressure" and result.move.target == "b"


def test_where_core_contention_explains_the_stall_the_reason_says_so():
    result = run_round(saturated(5), RoundState())
    assert result.decision == "migrate" and len(result.plan) == 2  # 8 - 4 threads: two guests of 2 cores
    assert "core contention: a has 8.0 cores wanted on 4 threads" in result.explanation.reason


def test_a_move_that_would_leave_its_node_short_says_so():
    """One move a round: moving one guest leaves a stalling as a whole, a new stall waits a round."""
    result = run_round(saturated(1), RoundState())
    assert result.decision == "no-pressure"
    reason = result.explanation.reason
    assert "4 guests hurt; moving vm:1 would leave a short of CPU as a whole" in reason
    assert "core contention: a has 8.0 cores wanted on 4 threads" in reason


def test_no_guest_stalling_and_no_node_to_go_to_are_told_apart():
    snap = stalling_with_idle_threads()
    calm = replace(snap, guests=tuple(replace(g, pressure=Pressure()) for g in snap.guests))
    assert run_round(calm, RoundState()).explanation.reason == "No guest stalls beyond the limits."
    b = snap.node("b")
    full = snap.with_nodes((snap.node("a"), replace(b, pressure=Pressure(cpu_some=0.5))))
    result = run_round(full, RoundState())
    assert result.decision == "no-pressure"
    assert result.explanation.reason == "1 guest hurts; none that does has a node to go to."
