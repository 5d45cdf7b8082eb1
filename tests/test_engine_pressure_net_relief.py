"""A pressure move must end more stalls than its own: on a node short of CPU as a whole,
moving one guest out relieves that guest and leaves its neighbours stalling."""

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
    assert "want 23.0 cores of its 20 CPU threads" in result.explanation.reason
    assert "stall 13% of the time (limit 10%)" in result.explanation.reason


def test_objective_both_evens_out_instead_and_says_why_no_pressure_move():
    result = run_round(short_cluster("both"), RoundState())
    assert result.decision == "migrate" and all(step.move.objective == "even" for step in result.plan)
    assert "No pressure move: the cluster's guests want 23.0 cores" in result.explanation.reason
