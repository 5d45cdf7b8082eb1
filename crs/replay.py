"""Replay a trace day through the engine: how would these settings have behaved?

Admins compare policies here before applying them. Every round collects the
simulated cluster, runs the real balancing round and approves its suggestion at
once (auto-rebalance), with migrations that take time and may fail as the
simulator makes them. The answer is what an admin would watch for: how high the
imbalance stayed, how often it sat above the threshold, how many migrations it
cost, and how many of them undid an earlier one (ping-pong).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace

import numpy as np

from . import options
from .balancer import run_round
from .decision import RoundState
from .guards import PastMove, guards_from
from .model import METHODS, MODES, SCALES, Settings
from .sources.config import ConfigError
from .sources.simulator import Simulator, parse_config
from .sources.trace import SAMPLE_SECONDS

START = 1372809600.0  # 2013-07-03 00:00 UTC, the trace's own day, so snapshot times read naturally
PING_PONG_WINDOW_S = 3600.0  # an A→B→A within an hour of trace time counts as ping-pong
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


@dataclass(frozen=True, slots=True)
class Replay:
    """Per-round series (one entry per round) and every migration the rounds started."""

    settings: Settings
    trace_s: tuple[float, ...]  # trace seconds since the start, per round
    imbalance: tuple[float, ...]
    decisions: tuple[str, ...]
    node_loads: tuple[dict[str, float], ...]
    migrations: tuple[Migration, ...]


def replay(source_config: dict, settings: Settings, rounds: int, cooldown_s: float = 0.0) -> Replay:
    """Run `rounds` balancing rounds on a fresh simulator built from `source_config`; a guest
    rests `cooldown_s` of trace time after its migration ended, as in the product."""
    cluster = Simulator(parse_config(source_config))
    interval = cluster.config.round_interval_s
    trace_per_caller_s = SAMPLE_SECONDS / cluster.config.seconds_per_sample
    state, running = RoundState(), {}
    series: list[tuple[float, float, str, dict[str, float]]] = []
    migrations: list[Migration] = []
    for r in range(rounds):
        now = START + r * interval
        snap = cluster.collect(now)
        trace_now = r * interval * trace_per_caller_s
        for task_id in list(running):
            status = cluster.task_status(task_id, now)
            if status.state != "running":
                migrations.append(
                    replace(running.pop(task_id), outcome=status.state, reason=status.reason, ended_s=trace_now)
                )
        history = (PastMove((m.sid,), m.source, m.target, m.outcome, m.ended_s) for m in migrations)
        result = run_round(snap.with_settings(settings), state, guards=guards_from(history, trace_now, cooldown_s, 0.0))
        state = result.state
        series.append((trace_now, result.imbalance, result.decision, result.node_loads))
        if result.decision == "migrate" and result.move:
            for sid in result.move.guests:
                task_id = cluster.migrate(sid, result.move.target, now)
                running[task_id] = Migration(sid, snap.guest(sid).node, result.move.target, series[-1][0])
    migrations += running.values()
    migrations.sort(key=lambda m: (m.started_s, m.sid))
    trace_s, values, decisions, loads = zip(*series) if series else ((), (), (), ())
    return Replay(settings, tuple(trace_s), tuple(values), tuple(decisions), tuple(loads), tuple(migrations))


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


def summary(result: Replay) -> dict:
    """The numbers an admin compares between two policies."""
    values = np.array(result.imbalance) if result.imbalance else np.zeros(1)
    outcomes = [m.outcome for m in result.migrations]
    return {
        "rounds": len(result.imbalance),
        "trace_hours": (result.trace_s[-1] + SAMPLE_SECONDS) / 3600 if result.trace_s else 0.0,
        "imbalance": {name: float(np.percentile(values, q)) for name, q in QUANTILES},
        "share_above_threshold": float((values > result.settings.threshold).mean()),
        "migrations": {
            "started": len(outcomes),
            "done": outcomes.count("done"),
            "failed": outcomes.count("failed"),
            "running": outcomes.count("running"),
        },
        "ping_pongs": len(ping_pongs(result.migrations)),
    }


# -- command line -------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = Settings()
    parser.add_argument("--trace", help="directory of usage-*.csv.gz files (default: the packaged Bitbrains day)")
    parser.add_argument("--nodes", type=int, default=12, help="number of simulated nodes (default 12)")
    parser.add_argument("--hot-nodes", type=int, default=3, help="nodes the initial placement crowds (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="initial placement and failure draws (default 0)")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="dynamic",
        help="default dynamic: the only mode in which the trace's usage matters",
    )
    parser.add_argument("--method", choices=METHODS, default=d.method)
    parser.add_argument("--scale", choices=SCALES, default=d.imbalance_scale, help="imbalance scale")
    parser.add_argument("--threshold", type=float, default=d.threshold, help=f"default {d.threshold}")
    parser.add_argument("--hold-duration", type=int, default=d.hold_duration, help=f"rounds, default {d.hold_duration}")
    parser.add_argument("--margin", type=float, default=d.margin, help=f"default {d.margin}")
    parser.add_argument(
        "--cooldown",
        type=options.number(0),
        default=30.0,
        help="minutes of trace time a guest rests after its migration, and is not sent back "
        "(default 30, the dashboard's default; 0 = Proxmox, no cooldown)",
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "--rounds", type=options.number(1, whole=True), help="rounds to run (default: the whole trace day)"
    )
    length.add_argument("--hours", type=options.number(0, strict=True), help="hours of trace time to run")
    parser.add_argument(
        "--round-interval",
        type=float,
        default=10.0,
        help="seconds between rounds; migrations take real seconds against it (default 10)",
    )
    parser.add_argument(
        "--samples-per-round",
        type=options.number(0, strict=True),
        default=1.0,
        help="5-minute trace samples per round, the time acceleration (default 1)",
    )
    parser.add_argument("--migration-mib-s", type=float, default=1024.0, help="migration bandwidth (default 1024)")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of migrations that fail (default 0)")
    parser.add_argument("--html", metavar="PATH", help="also write a self-contained Plotly report")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args: argparse.Namespace) -> int:
    settings = _settings(args)
    began = time.perf_counter()
    config = _source_config(args)  # refusals here are reported by the CLI, exit 2
    samples = Simulator(parse_config(config)).trace.samples
    rounds = args.rounds if args.rounds is not None else _rounds_for(args, samples)
    if rounds < 1:
        raise ConfigError(f"--rounds/--hours: {rounds} rounds; must be at least 1")
    result = replay(config, settings, rounds, cooldown_s=args.cooldown * 60.0)
    out = summary(result) | {"runtime_s": time.perf_counter() - began}
    if args.html:
        from .replay_report import write_html

        write_html(result, args.html)
    print(json.dumps(out | {"settings": _settings_dict(settings)}, indent=2) if args.json else render(result, out))
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    from .snapshot import parse_settings  # the contract's checks name the field and its range

    return parse_settings(
        {
            "mode": args.mode,
            "method": args.method,
            "imbalance_scale": args.scale,
            "threshold": args.threshold,
            "hold_duration": args.hold_duration,
            "margin": args.margin,
        },
        "settings",
    )


def _settings_dict(settings: Settings) -> dict:
    return {
        k: getattr(settings, k) for k in ("mode", "method", "imbalance_scale", "threshold", "hold_duration", "margin")
    }


def _source_config(args: argparse.Namespace) -> dict:
    config = {
        "nodes": args.nodes,
        "hot_nodes": args.hot_nodes,
        "seed": args.seed,
        "round_interval_s": args.round_interval,
        "seconds_per_sample": args.round_interval / args.samples_per_round,
        "migration_mib_s": args.migration_mib_s,
        "fail_rate": args.fail_rate,
    }
    return config | ({"trace": args.trace} if args.trace else {})


def _rounds_for(args: argparse.Namespace, samples: int) -> int:
    hours = args.hours if args.hours is not None else samples * SAMPLE_SECONDS / 3600
    return int(round(hours * 3600 / SAMPLE_SECONDS / args.samples_per_round))


def render(result: Replay, out: dict) -> str:
    s = result.settings
    q = out["imbalance"]
    m = out["migrations"]
    lines = [
        f"replay: {out['rounds']} rounds, {out['trace_hours']:.1f} h of trace, {out['runtime_s']:.1f} s",
        f"policy: mode {s.mode}, method {s.method}, threshold {s.threshold:g}, hold {s.hold_duration}, "
        f"margin {s.margin:g}, scale {s.imbalance_scale}",
        "",
        f"{'hour':>4} {'mean':>7} {'max':>7} {'migrations':>10}",
    ]
    lines += [f"{h:>4} {mean:>7.3f} {top:>7.3f} {count:>10}" for h, mean, top, count in hourly(result)]
    lines += [
        "",
        "imbalance  " + "  ".join(f"{name} {q[name]:.3f}" for name, _ in QUANTILES),
        f"above threshold {s.threshold:g}: {out['share_above_threshold']:.1%} of rounds",
        f"migrations: {m['started']} started, {m['done']} done, {m['failed']} failed, {m['running']} still running",
        f"ping-pong moves (A→B→A within an hour): {out['ping_pongs']}",
    ]
    return "\n".join(lines)


def hourly(result: Replay) -> list[tuple[int, float, float, int]]:
    """(hour, mean imbalance, max imbalance, migrations started) per hour of trace time."""
    hours: dict[int, list[float]] = {}
    for t, value in zip(result.trace_s, result.imbalance):
        hours.setdefault(int(t // 3600), []).append(value)
    started = [int(m.started_s // 3600) for m in result.migrations]
    return [(h, float(np.mean(v)), max(v), started.count(h)) for h, v in sorted(hours.items())]
