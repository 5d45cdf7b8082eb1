"""Replay a trace day through the engine: how would these settings have behaved?

Admins compare policies here before applying them. Every round collects the
simulated cluster, runs the real balancing round and approves its suggestion at
once (auto-rebalance), with migrations that take time and may fail as the
simulator makes them. The answer is what an admin would watch for: how high the
imbalance stayed, how often it sat above the threshold, how many migrations it
cost, and how many of them undid an earlier one (ping-pong).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

import numpy as np

from . import forecast, happiness, paid, pressure
from .balancer import run_round
from .decision import Move, RoundResult, RoundState
from .guards import PastMove, guards_from
from .model import Settings, Snapshot
from .pressure import Shortfall
from .replay_power import Power, Switchable
from .sources.base import TaskStatus
from .sources.simulator import Simulator, parse_config
from .sources.trace import SAMPLE_SECONDS, SAMPLES_PER_DAY, Trace
from .usage import node_stats

START = 1372809600.0  # 2013-07-03 00:00 UTC, the trace's own day, so snapshot times read naturally
PING_PONG_WINDOW_S = 3600.0  # an A→B→A within an hour of trace time counts as ping-pong
SETTLING_S = 3600.0  # the first hour places the crowded start; "within threshold" is judged after it
DAY_S = 86400.0
GIB = 2**30
QUANTILES = (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))


@dataclass(frozen=True, slots=True)
class Migration:
    sid: str
    source: str
    target: str
    started_s: float  # trace seconds since the replay began
    outcome: str = "running"  # done, failed, or still running when the replay ended
    reason: str = ""
    ended_s: float = 0.0  # trace seconds, once it ended
    memory_bytes: float = 0.0  # configured memory: what the migration copies
    cause: str = "balance"  # or "power": emptying a node to power it down (crs.replay_power)
    objective: str = "even"  # what the balancing move was for: "even" or "pressure" (crs.decision.Move)
    horizon_s: float = 0.0  # trace seconds its benefit was reckoned over (crs.payoff), and it is judged on
    paid: bool | None = None  # crs.paid's verdict over that horizon after it ended; None: not judged


@dataclass(frozen=True, slots=True)
class Replay:
    """Per-round series (one entry per round) and every migration the rounds started."""

    settings: Settings
    trace_s: tuple[float, ...]  # trace seconds since the start, per round
    imbalance: tuple[float, ...]
    decisions: tuple[str, ...]
    node_loads: tuple[dict[str, float], ...]
    migrations: tuple[Migration, ...]
    under_pressure: tuple[int, ...] = ()  # per round: guests stalled beyond the pressure limit (crs.happiness)
    powered_down: tuple[int, ...] = ()  # per round with --power: nodes asleep; empty without power
    power: Power | None = None  # the power policy's final state (its wake-up count), when replayed with it
    shortfalls: tuple[tuple[Shortfall, ...], ...] = ()  # per round: what the cluster as a whole lacked (crs.pressure)
    forecast_active: tuple[float, ...] = ()  # per round with the forecast on: share of guests whose forecast is used


class World(Protocol):
    """What a replay needs of a cluster: the simulator, or stored history (`History`)."""

    def collect(self, now: float) -> Snapshot: ...

    def migrate(self, sid: str, target: str, now: float) -> str: ...

    def task_status(self, task_id: str, now: float) -> TaskStatus: ...


def replay(
    source_config: dict[str, Any],
    settings: Settings,
    rounds: int,
    cooldown_s: float = 0.0,
    power: Power | None = None,
) -> Replay:
    """Run `rounds` balancing rounds on a fresh simulator built from `source_config`; a guest
    rests `cooldown_s` of trace time after its migration ended, as in the product; with
    `power`, hsqueeze's suggestion is applied at every round too. Time is true unless the
    config says otherwise: a round covers one sample period, and a migration takes its real
    seconds inside it rather than stretching over many rounds against the workload."""
    true_time = {"round_interval_s": float(SAMPLE_SECONDS)}
    cluster = Simulator(parse_config(true_time | source_config | {"usage_period": settings.usage_period}))
    interval = cluster.config.round_interval_s
    trace_per_caller_s = SAMPLE_SECONDS / cluster.config.seconds_per_sample
    clock = [(START + r * interval, r * interval * trace_per_caller_s) for r in range(rounds)]
    # the lead time of a forecast's moves: this cluster's round and migration bandwidth, in trace time
    settings = replace(
        settings,
        round_interval_s=interval * trace_per_caller_s,
        migration_mib_s=cluster.config.migration_mib_s / trace_per_caller_s,
    )
    foresee = _foresight(cluster) if settings.forecast == "on" else None
    return run(cluster, clock, settings, cooldown_s, power=power, foresee=foresee)


def _foresight(cluster: Simulator) -> Callable[[Snapshot, float], Snapshot]:
    """Each guest's forecast from its own trace history up to the sample shown (the trace as
    recorded, never a looped day, which is no history: past the trace's end nothing is forecast)."""
    trace = cluster.trace
    sids = [f"vm:{i}" for i in trace.vm_ids]

    def foresee(snap: Snapshot, now: float) -> Snapshot:
        sample = int(cluster.trace_seconds(now) // SAMPLE_SECONDS)
        found = dict(
            zip(
                sids,
                forecast.next_hour(trace.cpu_usage, trace.mem_usage_bytes, sample, SAMPLES_PER_DAY, SAMPLE_SECONDS),
            )
        )
        return replace(snap, guests=tuple(replace(g, forecast=found.get(g.sid)) for g in snap.guests))

    return foresee


def run(
    world: World,
    clock: Sequence[tuple[float, float]],
    settings: Settings,
    cooldown_s: float = 0.0,
    progress: Callable[[int], None] | None = None,
    power: Power | None = None,
    foresee: Callable[[Snapshot, float], Snapshot] | None = None,
) -> Replay:
    """One round per (now, seconds since the start) of `clock` on `world`, every planned move
    approved at once; `progress` hears the number of rounds done after each. With `power`
    (a world that can put nodes in maintenance), its step runs before each balancing round,
    which then sees the nodes it put to sleep or is emptying as in maintenance. `foresee` gives
    the round's snapshot its guests' forecasts. Each done balancing move is judged paid or not
    (crs.paid) on the rounds of the horizon its benefit was reckoned over, after it ended."""
    state = RoundState()
    running: dict[str, Migration] = {}
    series: list[tuple[float, float, str, dict[str, float]]] = []
    migrations: list[Migration] = []
    stalled: list[int] = []
    asleep: list[int] = []
    short: list[tuple[Shortfall, ...]] = []
    active: list[float] = []
    limits = pressure.Limits()
    judging: dict[int, list[paid.Measured]] = {}  # index in `migrations` → its measurements so far
    for done, (now, trace_now) in enumerate(clock, 1):
        snap = world.collect(now)
        for task_id in list(running):
            status = world.task_status(task_id, now)
            if status.state != "running":
                migrations.append(
                    replace(running.pop(task_id), outcome=status.state, reason=status.reason, ended_s=trace_now)
                )
                if status.state == "done" and migrations[-1].cause == "balance":
                    judging[len(migrations) - 1] = []
        _judge(snap, trace_now, migrations, judging, settings.imbalance_scale)
        if power is not None:
            started = power.step(cast(Switchable, world), snap, now)
            for sid, target in started:
                guest = snap.guest(sid)
                task_id = world.migrate(sid, target, now)
                running[task_id] = Migration(
                    sid, guest.node, target, trace_now, memory_bytes=guest.memory_bytes, cause="power"
                )
            snap = world.collect(now)  # the nodes power took out of service are in maintenance now
            asleep.append(len(power.asleep))
        history = (PastMove((m.sid,), m.source, m.target, m.outcome, m.ended_s) for m in migrations)
        seen = foresee(snap, now) if foresee else snap
        result = run_round(seen.with_settings(settings), state, guards=guards_from(history, trace_now, cooldown_s, 0.0))
        state = result.state
        stalled.append(len(happiness.stalled(snap)))
        short.append(pressure.shortfall(snap, limits))
        if result.explanation.forecast is not None:
            active.append(result.explanation.forecast["active_share"])
        series.append((trace_now, result.imbalance, result.decision, result.node_loads))
        for move in planned_moves(result):
            horizon_s = settings.benefit_horizon if move.payoff is None else move.payoff.horizon_s
            for sid in move.guests:
                task_id = world.migrate(sid, move.target, now)
                guest = snap.guest(sid)
                running[task_id] = Migration(
                    sid,
                    guest.node,
                    move.target,
                    trace_now,
                    memory_bytes=guest.memory_bytes,
                    objective=move.objective,
                    horizon_s=horizon_s,
                )
        if progress:
            progress(done)
    migrations += running.values()
    migrations.sort(key=lambda m: (m.started_s, m.sid))
    trace_s, values, decisions, loads = zip(*series) if series else ((), (), (), ())
    return Replay(
        settings,
        tuple(trace_s),
        tuple(values),
        tuple(decisions),
        tuple(loads),
        tuple(migrations),
        tuple(stalled),
        tuple(asleep),
        power,
        tuple(short),
        forecast_active=tuple(active),
    )


def _judge(
    snap: Snapshot,
    trace_now: float,
    migrations: list[Migration],
    judging: dict[int, list[paid.Measured]],
    scale: str,
) -> None:
    """Add this round's measurement to every done move within its horizon, and give the moves
    whose horizon it completes their verdict (a move whose horizon outlasts the replay is not judged)."""
    if not judging:
        return
    nodes = tuple(node_stats(snap, "dynamic"))
    guests = {g.sid: g for g in snap.guests}
    for index in list(judging):
        m = migrations[index]
        if trace_now > m.ended_s and (guest := guests.get(m.sid)) is not None:
            judging[index].append(paid.Measured(nodes, guest.node, guest.cpu_usage, guest.mem_usage_bytes))
        if trace_now >= m.ended_s + m.horizon_s:
            verdict = paid.judge(m.objective, m.source, judging.pop(index), m.horizon_s, scale)
            migrations[index] = replace(m, paid=None if verdict is None else verdict.paid)


class History:
    """A cluster's stored history as a world to replay: `frames` maps a time to the cluster as
    sampled then. Guests stay where the replay put them (a guest's use is taken as its own,
    wherever it runs), so node loads are the sums of their guests'; a move is done by the next
    frame. A guest first seen later starts where it was sampled."""

    def __init__(self, frames: dict[float, Snapshot]):
        self.frames = frames
        self.placement: dict[str, str] = {}

    def clock(self) -> list[tuple[float, float]]:
        times = sorted(self.frames)
        return [(t, t - times[0]) for t in times]

    def collect(self, now: float) -> Snapshot:
        frame = self.frames[now]
        for g in frame.guests:
            self.placement.setdefault(g.sid, g.node)
        return replace(
            frame,
            nodes=tuple(replace(n, cpu_usage=None, mem_usage_bytes=None) for n in frame.nodes),
            guests=tuple(replace(g, node=self.placement[g.sid]) for g in frame.guests),
        )

    def migrate(self, sid: str, target: str, now: float) -> str:
        self.placement[sid] = target
        return f"{sid}@{now}"

    def task_status(self, task_id: str, now: float) -> TaskStatus:
        return TaskStatus("done", 1.0)


def planned_moves(result: RoundResult) -> tuple[Move, ...]:
    """Every move the round proposes, approved at once (automation `automatic`): the steps of its plan."""
    if result.decision != "migrate":
        return ()
    return tuple(step.move for step in result.plan)


def ping_pongs(
    migrations: tuple[Migration, ...], window_s: float = PING_PONG_WINDOW_S
) -> list[tuple[Migration, Migration]]:
    """Pairs of completed moves of one guest where the second sends it back within `window_s`."""
    last: dict[str, Migration] = {}
    pairs = []
    for m in (m for m in migrations if m.outcome == "done"):
        previous = last.get(m.sid)
        if (
            previous
            and (previous.source, previous.target) == (m.target, m.source)
            and m.started_s - previous.started_s <= window_s
        ):
            pairs.append((previous, m))
        last[m.sid] = m
    return pairs


def summary(result: Replay) -> dict[str, Any]:
    """The numbers an admin compares between two policies; rates are per day of trace time."""
    values = np.array(result.imbalance) if result.imbalance else np.zeros(1)
    settled = np.array([v for t, v in zip(result.trace_s, result.imbalance) if t >= SETTLING_S])
    outcomes = [m.outcome for m in result.migrations]
    seconds = result.trace_s[-1] + SAMPLE_SECONDS if result.trace_s else 0.0
    days = seconds / DAY_S or 1.0
    moves_of = Counter(m.sid for m in result.migrations)
    busiest = min(moves_of.items(), key=lambda item: (-item[1], item[0])) if moves_of else (None, 0)
    pairs = len(ping_pongs(result.migrations))
    return {
        "rounds": len(result.imbalance),
        "trace_hours": seconds / 3600,
        "imbalance": {name: float(np.percentile(values, q)) for name, q in QUANTILES},
        "share_above_threshold": float((values > result.settings.threshold).mean()),
        # None when the replay is not longer than its first hour
        "share_within_threshold_after_first_hour": (
            float((settled <= result.settings.threshold).mean()) if settled.size else None
        ),
        "migrations": {
            "started": len(outcomes),
            "done": outcomes.count("done"),
            "failed": outcomes.count("failed"),
            "running": outcomes.count("running"),
            "per_day": len(outcomes) / days,
        },
        "gib_moved_per_day": sum(m.memory_bytes for m in result.migrations) / GIB / days,
        "moves_paid": moves_paid(result.migrations),
        "ping_pongs": pairs,
        "ping_pongs_per_day": pairs / days,
        "most_moves_of_one_guest": {"guest": busiest[0], "moves": busiest[1]},
        # a guest counts for a round's trace time while its CPU or memory pressure is above the limit
        "guest_minutes_under_pressure": sum(result.under_pressure) * _round_s(result) / 60,
        "days": by_day(result),
        "shortfall": shortfalls(result),
        # with the forecast on: the share of guest-rounds whose forecast earned its place (crs.forecast)
        "forecast_active_share": float(np.mean(result.forecast_active)) if result.forecast_active else None,
    } | ({"power": power_summary(result)} if result.power is not None else {})


def by_day(result: Replay) -> list[dict[str, Any]]:
    """Per day of trace time (day 1 places the crowded start, so it is read apart from the
    days after it): guest-minutes under pressure, migrations started, share of rounds above
    the threshold and GiB moved."""
    minutes_per_guest_round = _round_s(result) / 60
    rounds: dict[int, list[tuple[float, int]]] = {}
    for t, value, stalled in zip(result.trace_s, result.imbalance, result.under_pressure):
        rounds.setdefault(int(t // DAY_S), []).append((value, stalled))
    moved: dict[int, list[Migration]] = {}
    for m in result.migrations:
        moved.setdefault(int(m.started_s // DAY_S), []).append(m)
    return [
        {
            "day": day + 1,
            "rounds": len(rounds[day]),
            "guest_minutes_under_pressure": sum(s for _, s in rounds[day]) * minutes_per_guest_round,
            "migrations": len(moved.get(day, ())),
            "rounds_above_threshold": sum(v > result.settings.threshold for v, _ in rounds[day]) / len(rounds[day]),
            "gib_moved": sum(m.memory_bytes for m in moved.get(day, ())) / GIB,
            "moves_paid": moves_paid(moved.get(day, ())),
        }
        for day in sorted(rounds)
    ]


def moves_paid(migrations: Sequence[Migration]) -> dict[str, Any]:
    """Of the done balancing moves judged (crs.paid), how many paid, and the share; per objective too."""
    judged = [m for m in migrations if m.paid is not None]

    def counted(ms: list[Migration]) -> dict[str, Any]:
        return {"judged": len(ms), "paid": sum(bool(m.paid) for m in ms), "share": paid.share([m.paid for m in ms])}

    return counted(judged) | {
        "by_objective": {
            o: counted([m for m in judged if m.objective == o]) for o in sorted({m.objective for m in judged})
        }
    }


def shortfalls(result: Replay) -> list[dict[str, Any]]:
    """Per resource the cluster as a whole lacked at some round: its peak (the round most
    short), the spans of trace time it lasted (here only), and in one line an admin acts on
    (`pressure.recurrence`): how short, on how many days, at which hours, and the node to add."""
    round_s = _round_s(result)
    out = []
    for resource in ("cpu", "memory"):
        rounds = [
            (t, f) for t, found in zip(result.trace_s, result.shortfalls) for f in found if f.resource == resource
        ]
        if not rounds:
            continue
        peak = max(rounds, key=lambda r: r[1].short)[1]
        spans: list[list[float]] = []
        for t, _ in rounds:
            if spans and t - spans[-1][1] <= round_s:
                spans[-1][1] = t
            else:
                spans.append([t, t])
        out.append(
            {
                "resource": resource,
                "wanted": peak.wanted,
                "have": peak.have,
                "short": peak.short,
                "rounds": len(rounds),
                "spans_s": spans,
                "add": {"nodes": peak.nodes, "size": peak.node_size},
                "text": pressure.recurrence(rounds, math.ceil(len(result.trace_s) * round_s / DAY_S)),
            }
        )
    return out


def forecast_summary(trace: Trace, samples: int) -> dict[str, Any] | None:
    """How well each guest's history foretold its next-hour peak over the first `samples` of
    `trace` (never a looped day, which any forecast would know by heart): the seasonal
    baseline's and the naive forecast's mean absolute error, in cores and GiB. None while the
    span is not longer than a day."""
    per_hour = 3600 // SAMPLE_SECONDS
    span = slice(0, min(samples, trace.samples))
    cpu = forecast.accuracy(trace.cpu_usage[:, span], per_hour)
    memory = forecast.accuracy(trace.mem_usage_bytes[:, span] / GIB, per_hour)
    if cpu is None or memory is None:
        return None
    return {
        "percentile": forecast.PERCENTILE,
        "days_back": forecast.DAYS_BACK,
        "guest_hours": cpu.forecasts,
        "cpu_cores": {"seasonal": cpu.seasonal, "naive": cpu.naive},
        "memory_gib": {"seasonal": memory.seasonal, "naive": memory.naive},
    }


def _clock(trace_s: float) -> str:
    """Time of day of a trace second, with its day past the first: "13:25", "day 2 13:25"."""
    day, second = divmod(int(round(trace_s)), int(DAY_S))
    clock = f"{second // 3600:02d}:{second % 3600 // 60:02d}"
    return clock if day == 0 else f"day {day + 1} {clock}"


def power_summary(result: Replay) -> dict[str, Any]:
    """What sleeping cost and saved: node-hours powered down, and the migrations power caused
    apart from balancing's (`migrations` above counts both)."""
    assert result.power is not None
    caused = [m for m in result.migrations if m.cause == "power"]
    return {
        "minimal": result.power.minimal,
        "target": result.power.target,
        "node_hours_powered_down": sum(result.powered_down) * _round_s(result) / 3600,
        "most_nodes_asleep": max(result.powered_down, default=0),
        "power_downs": result.power.power_downs,
        "wakeups": result.power.wakeups,
        "power_migrations": len(caused),
        "balancing_migrations": len(result.migrations) - len(caused),
        "power_gib_moved": sum(m.memory_bytes for m in caused) / GIB,
    }


def _round_s(result: Replay) -> float:
    """Trace seconds one round stands for."""
    return result.trace_s[1] - result.trace_s[0] if len(result.trace_s) > 1 else SAMPLE_SECONDS


def hourly(result: Replay) -> list[tuple[int, float, float, int]]:
    """(hour, mean imbalance, max imbalance, migrations started) per hour of trace time."""
    hours: dict[int, list[float]] = {}
    for t, value in zip(result.trace_s, result.imbalance):
        hours.setdefault(int(t // 3600), []).append(value)
    started = [int(m.started_s // 3600) for m in result.migrations]
    return [(h, float(np.mean(v)), max(v), started.count(h)) for h, v in sorted(hours.items())]
