"""Every move pays for itself (crs.payoff): its benefit against its cost, gated outside `proxmox`."""

from engine_clusters import GIB, node, snapshot, vm

from crs.balancer import plan

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
    # the same move at the default speed pays
    assert plan(lopsided(preset="product", benefit_horizon=60.0)).decision == "migrate"


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
