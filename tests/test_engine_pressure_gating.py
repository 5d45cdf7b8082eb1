"""The pressure policy's timing and inputs: the seed's once-a-minute gating in the source's
clock, the averaging period, containers, and guest happiness."""

from dataclasses import replace

import pytest

from crs import happiness
from crs.balancer import plan, run_round
from crs.decision import RoundState
from crs.model import Guest, Node, Pressure, Settings, Snapshot
from crs.sources.simulator import Simulator, parse_config

GIB = 2**30


def stalled_cluster(clock_s, moved=False):
    """vm:1 stalls on a CPU-saturated node a; node b is idle."""
    nodes = (
        Node("a", 4, 64 * GIB, cpu_usage=6.0, pressure=Pressure(cpu_some=0.33)),
        Node("b", 16, 64 * GIB, cpu_usage=1.0, pressure=Pressure()),
    )
    guests = (
        Guest("vm:1", "b" if moved else "a", cores=4, cpu_usage=3.0, pressure=Pressure(cpu_some=0.33)),
        Guest("vm:2", "a", cores=4, cpu_usage=3.0, pressure=Pressure(cpu_some=0.33)),
        Guest("vm:3", "b", cores=4, cpu_usage=1.0, pressure=Pressure()),
    )
    return Snapshot(nodes, guests, settings=Settings(objective="pressure"), clock_s=clock_s)


def first_move(times, change_at=None):
    """Rounds every 10 s of source clock; the first time a pressure move is proposed."""
    state = RoundState()
    for t in times:
        result = run_round(stalled_cluster(t, moved=change_at is not None and t >= change_at), state)
        state = result.state
        if result.decision == "migrate":
            return t, result
    return None, None


def test_first_pressure_move_two_minutes_after_the_first_round_as_the_seed():
    """The seed's T6 timeline: t=0 starts the check clock, t=60 the quiet minute, t=120 acts."""
    at, result = first_move(range(0, 300, 10))
    assert at == 120 and result.move.objective == "pressure"


def test_a_state_change_restarts_the_quiet_minute():
    """A guest changes node at t=100: the look at t=120 is spent waiting, the next one at t=180 acts."""
    at, _ = first_move(range(0, 300, 10), change_at=100)
    assert at == 180


def test_waiting_rounds_say_why_and_crs_plan_does_not_wait():
    result = run_round(stalled_cluster(0.0), RoundState())
    assert result.decision == "pressure-wait" and "once a minute" in result.explanation.reason
    assert result.explanation.usage_period == 0.0  # the proxmox preset: the latest values
    assert plan(stalled_cluster(0.0)).decision == "migrate"  # a file answers what a round would do


def test_containers_are_not_moved_under_never_and_are_under_restart():
    snap = stalled_cluster(None)
    cts = replace(snap, guests=tuple(replace(g, sid=g.sid.replace("vm", "ct")) for g in snap.guests))
    never = plan(replace(cts, settings=Settings(objective="pressure", containers="never")))
    assert never.decision == "no-pressure"
    restart = plan(replace(cts, settings=Settings(objective="pressure", containers="restart")))
    assert restart.decision == "migrate" and restart.move.leader.startswith("ct:")
    even = replace(cts, settings=Settings(threshold=0.0, hold_duration=0, margin=0.0, containers="never"))
    assert plan(even).decision == "no-candidate"


def test_happiness_per_guest_and_cluster():
    snap = stalled_cluster(None)
    assert happiness.score(snap.guest("vm:1")) == pytest.approx(0.67)
    assert happiness.score(replace(snap.guest("vm:3"), pressure=None)) is None
    cluster = happiness.of_cluster(snap)
    assert (cluster.happy, cluster.guests) == (1, 3) and cluster.share == pytest.approx(1 / 3)


def test_simulator_usage_is_the_mean_over_the_period_in_trace_time():
    """At 1 s per 5-minute sample, 600 s of trace time are the latest two samples; 0 and 300 the latest."""
    latest = Simulator(parse_config({"seconds_per_sample": 1.0, "usage_period": 300}))
    mean = Simulator(parse_config({"seconds_per_sample": 1.0, "usage_period": 600}))
    for sim in (latest, mean):
        sim.collect(0.0)
    a, b = latest.collect(5.0), mean.collect(5.0)
    assert b.clock_s == 5 * 300  # the simulator's clock is trace time
    trace = latest.trace
    i = 0
    assert a.guests[i].cpu_usage == pytest.approx(trace.cpu_usage[i, 5])
    assert b.guests[i].cpu_usage == pytest.approx(trace.cpu_usage[i, 4:6].mean())
    assert sum(g.cpu_usage for g in b.guests) != pytest.approx(sum(g.cpu_usage for g in a.guests))
