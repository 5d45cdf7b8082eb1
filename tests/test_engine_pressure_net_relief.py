"""A pressure move must end more stalls than its own: on a node short of CPU as a whole,
moving one guest out relieves that guest and leaves its neighbours stalling."""

from dataclasses import replace

from crs import pressure
from crs.balancer import run_round
from crs.decision import RoundState
from crs.model import Guest, Node, Pressure, Settings, Snapshot

GIB = 2**30


def saturated(moves_per_round: int) -> Snapshot:
    """Node a has 4 threads and 4 guests wanting 2 each: all stall half the time; b is idle."""
    stall = Pressure(cpu_some=0.5)
    nodes = (
        Node("a", 4, 64 * GIB, cpu_usage=8.0, mem_usage_bytes=8 * GIB, pressure=stall),
        Node("b", 16, 64 * GIB, cpu_usage=0.0, mem_usage_bytes=0.0, pressure=Pressure()),
    )
    guests = tuple(
        Guest(f"vm:{i}", "a", cores=2, memory_bytes=2 * GIB, cpu_usage=2.0, mem_usage_bytes=2 * GIB, pressure=stall)
        for i in range(1, 5)
    )
    return Snapshot(nodes, guests, settings=Settings(objective="pressure", moves_per_round=moves_per_round))


def test_one_move_that_leaves_the_node_stalling_is_not_made():
    result = run_round(saturated(1), RoundState())
    assert result.decision == "no-pressure"


def test_the_moves_that_end_the_stall_are_made_and_no_more():
    result = run_round(saturated(5), RoundState())
    assert result.decision == "migrate"
    assert [(s.move.source, s.move.target) for s in result.plan] == [("a", "b"), ("a", "b")]  # 8 − 4 = 4 threads


def test_a_stall_seen_at_the_round_before_is_relieved_a_move_at_a_time():
    """A lasting stall is no peak: a round that can end it only over several rounds starts."""
    result = run_round(saturated(1), RoundState(stalled_nodes=("a",)))
    assert result.decision == "migrate" and result.move.source == "a"
    assert result.state.stalled_nodes == ("a",)  # the next round sees it lasting too


def short_cluster(objective: str) -> Snapshot:
    """`saturated` with b busy too: 8 + 15 cores wanted on 4 + 16 threads. Spread perfectly, the
    guests would still stall 3 / 23 = 13 % of the time, beyond the 10 % limit."""
    a = saturated(5)
    busy = Pressure(cpu_some=0.0)
    b = Node("b", 16, 64 * GIB, cpu_usage=15.0, mem_usage_bytes=8 * GIB, pressure=busy)
    settings = Settings(objective=objective, moves_per_round=5, threshold=0.0, hold_duration=0, margin=0.0)
    return Snapshot((a.nodes[0], b), a.guests, settings=settings)


def test_no_pressure_move_while_the_cluster_as_a_whole_lacks_the_cpu():
    """23 cores wanted on 20 threads: a move would only shift the stall from a's guests to b's."""
    result = run_round(short_cluster("pressure"), RoundState())
    assert result.decision == "pressure-wait" and not result.plan
    assert "no placement can help: the guests want 23.0 cores on 20 threads, 3 cores short" in (
        result.explanation.reason
    )
    assert "stall 13% of the time (limit 10%); add a node of 4 threads" in result.explanation.reason


def test_objective_both_evens_out_instead_and_says_why_no_pressure_move():
    result = run_round(short_cluster("both"), RoundState())
    assert result.decision == "migrate" and all(step.move.objective == "even" for step in result.plan)
    assert "No pressure move: no placement can help: the guests want 23.0 cores" in result.explanation.reason


def test_the_shortfall_names_the_node_that_covers_it():
    """23 cores on 20 threads is 3 short: the smallest of the cluster's sizes that covers it (a's 4
    threads); 60 cores short takes four of its largest (16 threads)."""
    snap = short_cluster("pressure")
    (cpu,) = pressure.shortfall(snap, pressure.Limits())
    assert (cpu.resource, cpu.wanted, cpu.have, cpu.node_size, cpu.nodes) == ("cpu", 23.0, 20.0, 4, 1)
    b = replace(snap.node("b"), cpu_usage=75.0)
    (cpu,) = pressure.shortfall(snap.with_nodes((snap.node("a"), b)), pressure.Limits())
    assert (cpu.short, cpu.node_size, cpu.nodes) == (63.0, 16, 4)
    assert cpu.remedy() == "add 4 nodes of 16 threads"


def test_a_cluster_short_of_memory_says_so_and_moves_nothing():
    """Both nodes above their 85 % memory limit together: 120 GiB used on 2 × 54.4 GiB."""
    snap = short_cluster("pressure")
    full = tuple(replace(n, cpu_usage=1.0, mem_usage_bytes=60 * GIB) for n in snap.nodes)
    found = pressure.shortfall(snap.with_nodes(full), pressure.Limits())
    assert [f.resource for f in found] == ["memory"]
    assert found[0].figures() == "the guests use 120 GiB of memory on 109 GiB under the nodes' limits, 12 GiB short"
    assert found[0].remedy() == "add a node of 64 GiB"
    result = run_round(snap.with_nodes(full), RoundState())
    assert result.decision == "pressure-wait" and not result.plan
    assert "no placement can help: the guests use 120 GiB of memory" in result.explanation.reason


def test_objective_even_says_no_placement_can_help_too():
    result = run_round(short_cluster("even"), RoundState())
    assert result.decision == "migrate"
    assert "No placement can help: the guests want 23.0 cores on 20 threads, 3 cores short" in (
        result.explanation.reason
    )
