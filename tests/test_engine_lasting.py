"""A pressure move pays only for a stall that lasts (crs.lasting): a CPU peak its node did not
show at the round before is expected to end before a move off it pays, so it waits a round."""

from dataclasses import replace
from pathlib import Path

from engine_clusters import GIB, node, snapshot, vm

from crs.balancer import run_round
from crs.decision import RoundState
from crs.snapshot import load_file

ACT_NOW = {"threshold": 0.0, "hold_duration": 0, "mode": "dynamic"}
QUIET = RoundState(checked_s=0.0, changed_s=0.0)  # the pressure gate's minute long served (crs.gating)


def peak(preset="product", clock_s=10_000.0, **settings):
    """n1's 3 guests want 6 cores of its 4 threads (core contention); n2 is idle."""
    stalled = {"cpu_some": 0.5}
    nodes = [node("n1", 4, 64 * GIB, pressure=stalled), node("n2", 16, 64 * GIB, pressure={})]
    guests = [vm(f"vm:{100 + i}", "n1", cores=2, cpu=2.0, pressure=stalled) for i in range(3)]
    snap = snapshot(nodes, guests, preset=preset, objective="pressure", **ACT_NOW, **settings)
    return replace(snap, clock_s=clock_s)


def test_a_new_peak_waits_a_round_and_says_why_with_the_cost():
    result = run_round(peak(), QUIET)
    assert result.decision == "no-pressure" and result.move is None
    assert "relieve no stall: it is new this round" in result.explanation.reason
    assert "against a cost of" in result.explanation.reason
    assert result.state.stalled_nodes == ("n1",)  # the next round sees it lasting


def test_a_stall_seen_at_the_round_before_is_relieved_over_the_guests_horizon():
    first = run_round(peak(), QUIET)
    result = run_round(peak(clock_s=10_300.0), first.state)
    assert result.decision == "migrate" and result.move is not None and result.move.source == "n1"
    assert result.move.payoff is not None and result.move.payoff.horizon_s == 3600.0


def test_the_proxmox_preset_and_a_snapshot_file_move_at_once():
    """Proxmox weighs no cost; `crs plan` on a file without a clock has no round before to wait for."""
    assert run_round(peak(preset="proxmox"), QUIET).decision == "migrate"
    assert run_round(peak(clock_s=None), QUIET).decision == "migrate"


def test_a_memory_stall_does_not_wait():
    """Memory above the limit does not pass with the next sample: n1 holds 60 of 64 GiB."""
    full = node("n1", 16, 64 * GIB, mem_usage_bytes=60 * GIB, pressure={})
    nodes = [full, node("n2", 16, 64 * GIB, pressure={})]
    guests = [vm("vm:101", "n1", memory_bytes=32 * GIB, mem=30 * GIB), vm("vm:102", "n1", mem=30 * GIB)]
    snap = replace(snapshot(nodes, guests, preset="product", objective="pressure", **ACT_NOW), clock_s=10_000.0)
    result = run_round(snap, QUIET)
    assert result.decision == "migrate" and result.move is not None and result.move.objective == "pressure"


def test_a_foreseen_peak_is_moved_ahead_only_where_it_came_every_day():
    """node03's guests peak at 13:25 on 5 of the last 5 days: a move ahead of it pays; a peak
    seen on 3 of 5 days (enough to be foreseen) may pass like a new one, and waits."""
    fixture = Path(__file__).parent / "fixtures" / "forecast" / "node03-peak-at-1325.json"
    snap = load_file(fixture)
    assert run_round(snap, QUIET).decision == "migrate"
    some_days = tuple(
        replace(g, forecast=replace(g.forecast, seen=3)) if g.forecast and g.node == "node03" else g
        for g in snap.guests
    )
    waited = run_round(replace(snap, guests=some_days), QUIET)
    assert waited.decision != "migrate" and "Predicted: node03" not in waited.explanation.reason
