"""Every move pays for itself (crs.payoff): its benefit against its cost, gated outside `proxmox`;
and no futile pressure move onto a node short at its own forecast peak."""

from dataclasses import replace

from engine_clusters import GIB, node, snapshot, vm

from crs import pressure
from crs.balancer import plan, run_round
from crs.decision import RoundState
from crs.futile import PEAK_MEMORY_S

ACT_NOW = {"threshold": 0.0, "hold_duration": 0, "mode": "dynamic"}


def lopsided(**settings):
    """Two nodes, one carrying a large guest and a small one: moving the large guest evens them out."""
    nodes = [node("n1", 16, 256 * GIB), node("n2", 16, 256 * GIB)]
    guests = [
        vm("vm:101", "n1", cores=8, memory_bytes=128 * GIB, cpu=8.0, mem=64 * GIB),
        vm("vm:102", "n1", cores=2, memory_bytes=4 * GIB, cpu=2.0, mem=2 * GIB),
    ]
    return snapshot(nodes, guests, **ACT_NOW, **settings)


def test_a_balancing_move_names_its_benefit_and_its_cost_in_words_and_figures():
    result = plan(lopsided(preset="product"))
    assert result.decision == "migrate"
    step = result.to_plan_dict()["plan"]["moves"][0]
    assert step["benefit"] > step["cost"] > 0 and step["payoff_unit"] == "imbalance-seconds"
    assert step["copy_bytes"] == 128 * GIB and step["migration_speed"] == 1024 * 2**20
    assert "%·h of imbalance over ~1 h against a cost of" in result.explanation.reason
    assert "to copy 128 GiB at 1024 MiB/s" in result.explanation.reason


def test_a_move_whose_copy_outlasts_its_gain_is_not_made_but_shown_with_both_figures():
    slow = plan(lopsided(preset="product", migration_mib_s=1.0, benefit_horizon=60.0))
    assert slow.decision == "below-margin" and slow.move is not None
    assert "does not pay for itself" in slow.explanation.reason and "against a cost of" in slow.explanation.reason
    assert slow.move.payoff is not None and slow.move.payoff.benefit < 1.1 * slow.move.payoff.cost
    # at the default 1024 MiB/s its 128 GiB take 2 min: a gain lasting a minute does not pay, an hour's does
    assert plan(lopsided(preset="product", benefit_horizon=60.0)).decision == "below-margin"
    assert plan(lopsided(preset="product", benefit_horizon=3600.0)).decision == "migrate"


def test_the_proxmox_preset_weighs_no_cost():
    result = plan(lopsided(migration_mib_s=1.0, benefit_horizon=60.0))
    assert result.decision == "migrate" and result.move is not None and result.move.payoff is None
    assert "benefit" not in result.to_plan_dict()["plan"]["moves"][0]


def test_a_spike_above_the_guests_usual_peak_gets_a_shorter_horizon():
    spiking = {"cpu": 2.0, "memory_bytes": 64 * GIB, "at_s": 600.0, "seen": 5, "days": 7}
    nodes = [node("n1", 16, 256 * GIB), node("n2", 16, 256 * GIB)]
    guests = [
        vm("vm:101", "n1", cores=8, memory_bytes=128 * GIB, cpu=8.0, mem=64 * GIB, forecast=spiking),
        vm("vm:102", "n1", cores=2, memory_bytes=4 * GIB, cpu=2.0, mem=2 * GIB),
    ]
    result = plan(snapshot(nodes, guests, preset="product", **ACT_NOW))
    assert result.move is not None and result.move.payoff is not None
    assert result.move.payoff.horizon_s == 3600.0 * 2.0 / 8.0  # its peak ahead is a quarter of its use now


def test_a_pressure_move_names_the_stall_it_relieves_against_what_it_costs():
    stalled = {"cpu_some": 0.5}
    nodes = [node("n1", 4, 64 * GIB, pressure=stalled), node("n2", 16, 64 * GIB, pressure={})]
    guests = [vm(f"vm:{100 + i}", "n1", cores=2, cpu=2.0, pressure=stalled) for i in range(3)]
    result = plan(snapshot(nodes, guests, preset="product", objective="pressure", **ACT_NOW))
    assert result.decision == "migrate" and result.move is not None and result.move.objective == "pressure"
    step = result.to_plan_dict()["plan"]["moves"][0]
    assert step["payoff_unit"] == "guest-seconds" and step["benefit"] > step["cost"] > 0
    assert "guest-seconds of stall over ~1 h against a cost of" in result.explanation.reason
    held = plan(snapshot(nodes, guests, preset="product", objective="pressure", benefit_horizon=1.0, **ACT_NOW))
    assert held.decision == "no-pressure" and "pays for itself" in held.explanation.reason


def test_no_pressure_move_goes_to_a_node_short_of_cpu_at_its_forecast_peak():
    stalled = {"cpu_some": 0.5}
    # vm:200's next-hour peak (seen once in 7 days: no predicted stall) would want 20 cores of n2's 16
    once = {"cpu": 20.0, "memory_bytes": 2 * GIB, "at_s": 1200.0, "seen": 1, "days": 7}
    nodes = [node("n1", 4, 64 * GIB, pressure=stalled), node("n2", 16, 64 * GIB, pressure={})]
    guests = [vm(f"vm:{100 + i}", "n1", cores=2, cpu=2.0, pressure=stalled) for i in range(3)]
    quiet = vm("vm:200", "n2", cores=20, cpu=1.0, forecast=once)
    settings = {"preset": "product", "objective": "pressure", **ACT_NOW}
    assert plan(snapshot(nodes, [*guests, quiet], forecast="off", **settings)).decision == "migrate"
    futile = plan(snapshot(nodes, [*guests, quiet], forecast="on", **settings))
    assert futile.decision == "no-pressure" and futile.move is None
    assert "none that does has a node to go to" in futile.explanation.reason


def test_a_recurring_shortfall_is_told_in_one_line_with_its_days_and_hours():
    short = pressure.Shortfall("cpu", 311.0, 288.0, 48.0)
    worse = pressure.Shortfall("cpu", 310.6 + 2.0, 288.0, 48.0)
    day = 86_400.0
    found = [(d * day + h * 3600.0, short) for d in (0, 1, 3) for h in (10, 11, 12)] + [(22 * 3600.0, short)]
    found.append((2 * day + 12 * 3600.0, worse))  # 10 of the 11 short rounds fall within 10:00–13:00
    assert pressure.recurrence(found, 5) == (
        "short of 25 cores at peaks on 4 of 5 days, mostly 10:00–13:00; add a node of 48 threads"
    )


def test_within_a_week_of_a_shortfall_at_its_peak_the_cluster_makes_no_pressure_move():
    stalled = {"cpu_some": 0.5}
    nodes = [node("n1", 4, 64 * GIB, pressure=stalled), node("n2", 16, 64 * GIB, pressure={})]
    hot = [vm(f"vm:{100 + i}", "n1", cores=2, cpu=2.0, pressure=stalled) for i in range(3)]
    settings = {"preset": "product", "objective": "pressure", **ACT_NOW}
    at_peak = snapshot(nodes, [*hot, vm("vm:300", "n2", cores=16, cpu=30.0)], **settings)
    peak = run_round(replace(at_peak, clock_s=1000.0), RoundState())
    assert peak.move is None and peak.state.short_s == 1000.0
    calm = snapshot(nodes, hot, **settings)
    later = run_round(replace(calm, clock_s=1000.0 + 3600.0), peak.state)
    assert later.decision == "pressure-wait" and later.move is None
    assert "lacked CPU or memory at its peak 1.0 h ago" in later.explanation.reason
    assert run_round(replace(calm, clock_s=1000.0 + PEAK_MEMORY_S), later.state).decision == "migrate"
