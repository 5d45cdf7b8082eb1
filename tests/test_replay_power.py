"""`crs replay --power`: hsqueeze's suggestion applied over a replay, on a hand-checked cluster."""

import gzip
import json

from crs.capacity import Size
from crs.fits import Limits
from crs.model import Settings
from crs.programs.cli import main
from crs.replay import START, power_summary, run
from crs.replay_power import Power
from crs.sources.simulator import Simulator, parse_config

GIB = 2**30


def quiet_then_busy(tmp_path, quiet=6, busy=6):
    """Four 2-core, 8 GiB guests: 0.25 cores each for `quiet` samples, then 1.8 cores each."""
    rows = ["vm_id,timestamp,cpu_cores,cpu_usage_pct,mem_capacity_kb,mem_usage_kb"]
    for vm in range(1, 5):
        for s in range(quiet + busy):
            pct = 12.5 if s < quiet else 90.0
            rows.append(f"{vm},{START + s * 300:.0f},2,{pct},{8 * 2**20},{2**20}")
    with gzip.open(tmp_path / "usage-hand.csv.gz", "wt") as f:
        f.write("\n".join(rows) + "\n")
    config = parse_config(
        {
            "trace": str(tmp_path),
            "nodes": 4,
            "node_sizes": [{"cpus": 8, "memory_gib": 64}],
            "hot_nodes": 4,
            "round_interval_s": 10.0,
            "seconds_per_sample": 10.0,
            "migration_mib_s": 1024.0,  # 8 GiB in 8 s: done by the next round
        }
    )
    placement = {f"vm:{i}": f"node0{i}" for i in range(1, 5)}  # one guest a node
    state = {"started_at": None, "next_task": 1, "tasks": {}, "placement": placement}
    return Simulator(config, state)


def test_an_underused_cluster_sleeps_three_nodes_and_wakes_one_when_the_load_rises(tmp_path):
    cluster = quiet_then_busy(tmp_path)
    clock = [(START + r * 10.0, r * 300.0) for r in range(12)]
    power = Power(Size(1, 8 * GIB), Limits())
    result = run(cluster, clock, Settings(), power=power)
    # Round 0: every node has room for 7 standard guests (64 GiB / 8, one taken); node01..node03
    # (one guest each, by name) are emptied onto node04 (most memory free), which keeps room for 4.
    # Quiet load 4 × 0.25 = 1 core ≤ 0.6 × node04's 8 CPUs, so all three may sleep.
    moved = [(m.sid, m.source, m.target) for m in result.migrations if m.cause == "power"]
    assert moved == [("vm:1", "node01", "node04"), ("vm:2", "node02", "node04"), ("vm:3", "node03", "node04")]
    # Round 1: the three are empty and asleep. Round 6: 4 × 1.8 = 7.2 cores > 0.8 × 8 CPUs:
    # node01, asleep longest (first by name of the three), wakes; 7.2 > 0.6 × 8 keeps it awake.
    assert result.powered_down == (0, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2)
    got = power_summary(result)
    assert got["node_hours_powered_down"] == 27 * 5 / 60  # 27 node-rounds of 5 minutes of trace
    assert (got["power_downs"], got["wakeups"], got["power_migrations"]) == (3, 1, 3)
    assert got["power_gib_moved"] == 24
    # balancing then spreads the busy guests onto the woken node, and those moves count apart
    balancing = [m for m in result.migrations if m.cause == "balance"]
    assert balancing and got["balancing_migrations"] == len(balancing)
    assert {m.target for m in balancing} == {"node01"} and min(m.started_s for m in balancing) >= 6 * 300


def test_cli_power_reports_node_hours_power_migrations_and_wakeups(capsys):
    assert main(["replay", "--hours", "1", "--power", "--cpu-overcommit", "16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    power = out["power"]
    assert (power["minimal"], power["target"]) == (2.0, 2.0)
    assert power["node_hours_powered_down"] > 0 and power["power_migrations"] > 0
    assert out["settings"]["cpu_overcommit"] == 16
    assert power["power_migrations"] + power["balancing_migrations"] == out["migrations"]["started"]
    assert main(["replay", "--hours", "1"]) == 0
    assert "power (" not in capsys.readouterr().out  # without --power, as before
