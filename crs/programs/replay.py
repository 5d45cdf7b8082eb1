"""`python -m crs replay`: a trace through the engine's rounds on a simulated cluster.

Its own module so that the simulator and its traces load only for this command (issue 35:
they were a good part of every `plan`'s start-up).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

from .. import replay, snapshot
from ..capacity import parse_size
from ..fits import Limits
from ..model import FORECAST_USES, METHODS, MODES, OBJECTIVES, SCALES, Settings
from ..replay_power import Power
from ..sources import trace
from ..sources.config import ConfigError
from ..sources.simulator import Simulator, parse_config
from . import options

# The planner's settings `crs replay` takes as flags.
PLAN_SETTINGS = {"moves_per_round": int, "target_imbalance": float, "load_floor": float}

HELP = """A trace through the engine's rounds on a simulated cluster, every proposed move approved at once.
Time is true by default: a round per 5-minute sample, a migration its real seconds inside it.

Traces (--trace): bitbrains (the default: 416 VMs with their real sizes), planetlab (1052 VMs, CPU only),
google (800 VMs, CPU and memory), bitbrains-2013-07|08|09 (eight days of each Rnd month, 423-498 VMs with
their real sizes; tune on one month, judge on another), or a directory holding one of those formats.
PlanetLab and Google give no VM sizes: each of their VMs takes the cores and memory of a
Bitbrains VM drawn with a fixed seed (the same on every run), and a PlanetLab VM also that VM's memory usage
over the day.
Origins and licences: crs/data/traces/README.md."""


POWER_SIZE = "4c,8g"
RESOURCES = {"cpu": "CPU", "memory": "memory"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = HELP
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--trace", help="bitbrains (default), planetlab, google, bitbrains-2013-07|08|09, or a trace directory"
    )
    parser.add_argument("--nodes", type=int, default=12, help="number of simulated nodes (default 12)")
    parser.add_argument("--hot-nodes", type=int, default=3, help="nodes the initial placement crowds (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="initial placement and failure draws (default 0)")
    parser.add_argument(
        "--mode", choices=MODES, default="dynamic", help="default dynamic: the mode that reads the trace's usage"
    )
    d = Settings()
    parser.add_argument(
        "--preset",
        choices=("proxmox", "product"),
        default="product",
        help="the settings a flag does not give: product (default, what new clusters start with) or proxmox "
        "(Proxmox's single move per round)",
    )
    parser.add_argument(
        "--objective",
        choices=OBJECTIVES,
        help="even (default), pressure or both; the summary counts guest-minutes under pressure for each",
    )
    parser.add_argument(
        "--forecast",
        choices=FORECAST_USES,
        help="on: plans read each guest's forecast from its trace history (from day 2 on): pressure moves ahead "
        "of a predicted stall, no move onto a node predicted to stall within the hour; default the preset's "
        "(product on, proxmox off)",
    )
    parser.add_argument("--method", choices=METHODS, help=f"default {d.method}")
    parser.add_argument("--scale", dest="imbalance_scale", choices=SCALES, help="imbalance scale")
    parser.add_argument("--threshold", type=float, help="fraction; default the preset's")
    parser.add_argument("--hold-duration", type=int, help="rounds (a round = a 5-minute sample); default the preset's")
    parser.add_argument("--margin", type=float, help="fraction; default the preset's")
    for name, kind in PLAN_SETTINGS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, help="default the preset's")
    parser.add_argument(
        "--cooldown",
        type=options.number(0),
        default=30.0,
        help="minutes of trace time a guest rests after its migration, and is not sent back "
        "(default 30, the dashboard's default; 0 = Proxmox, no cooldown)",
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--rounds", type=options.number(1, whole=True), help="rounds to run (default: the whole trace)")
    length.add_argument("--hours", type=options.number(0, strict=True), help="hours of trace time to run")
    length.add_argument(
        "--days", type=options.number(1, whole=True), help="days of the trace to run, at most its own (default: all)"
    )
    parser.add_argument(
        "--list-traces", action="store_true", help="name every packaged trace with its days, VMs and sample step"
    )
    parser.add_argument(
        "--round-interval",
        type=float,
        default=float(trace.SAMPLE_SECONDS),
        help=f"seconds between rounds; migrations take real seconds against it (default {trace.SAMPLE_SECONDS}: "
        "true time, a round per sample; less replays faster rounds, each migration then spans more of the workload)",
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
    parser.add_argument(
        "--power",
        action="store_true",
        help="apply hsqueeze's suggestion every round (minimal and target room 2.0 / 2.0 standard guests): "
        "empty nodes and power them down, wake them when room runs short; reports node-hours powered down, "
        "power migrations apart from balancing ones, and wake-ups",
    )
    parser.add_argument(
        "--power-size",
        type=parse_size,
        default=parse_size(POWER_SIZE),
        help=f"hsqueeze's standard guest, room is counted in these (default {POWER_SIZE}, the dashboard's medium)",
    )
    parser.add_argument(
        "--cpu-overcommit",
        type=options.number(0, strict=True),
        help="configured cores per CPU thread a node may take, Ganeti's vcpu_ratio "
        f"(default {Limits().cpu_overcommit:g}): what balancing moves and --power's room are checked against",
    )


def run(args: argparse.Namespace) -> int:
    if args.list_traces:
        return _list_traces(args.json)
    if args.cooldown < 0:
        raise ConfigError(f"--cooldown: {args.cooldown!r} minutes; must be >= 0")
    settings = _replay_settings(args)
    began = time.perf_counter()
    config = _replay_source(args)  # refusals here are reported by main(), exit 2
    trace_of = Simulator(parse_config(config)).trace
    samples = trace_of.samples
    if args.days is not None and args.days * trace.SAMPLES_PER_DAY > samples:
        raise ConfigError(
            f"--days: {args.days} days; this trace has {samples / trace.SAMPLES_PER_DAY:g} (--hours loops it)"
        )
    rounds = args.rounds if args.rounds is not None else _rounds_for(args, samples)
    if rounds < 1:
        raise ConfigError(f"--rounds/--hours: {rounds} rounds; must be at least 1")
    limits = Limits(settings.memory_reserve_bytes, settings.cpu_overcommit)
    power = Power(args.power_size, limits) if args.power else None
    result = replay.replay(config, settings, rounds, cooldown_s=args.cooldown * 60.0, power=power)
    out = replay.summary(result) | {"runtime_s": time.perf_counter() - began}
    out["forecast"] = replay.forecast_summary(trace_of, round(rounds * args.samples_per_round))
    if args.html:
        from .replay_report import write_html  # Plotly loads only for the report

        write_html(result, args.html)
    trace_name = args.trace or "bitbrains"
    if args.json:
        print(json.dumps(out | {"trace": trace_name, "settings": dataclasses.asdict(settings)}, indent=2))
    else:
        print(_replay_table(result, out, trace_name))
    return 0


def _replay_settings(args: argparse.Namespace) -> Settings:
    """The flags given, over the preset's values; the contract's checks name a bad field and its range."""
    names = ["mode", "preset", "objective", "forecast", "method", "imbalance_scale", "threshold", "hold_duration"]
    names += ["margin"]
    names += ["cpu_overcommit"]
    names += list(PLAN_SETTINGS)
    given = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    return snapshot.parse_settings(given, "settings")


def _replay_source(args: argparse.Namespace) -> dict[str, Any]:
    if args.samples_per_round <= 0:
        raise ConfigError(f"--samples-per-round: {args.samples_per_round!r} must be > 0")
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
    if args.days is not None:
        samples = args.days * trace.SAMPLES_PER_DAY
    hours = args.hours if args.hours is not None else samples * trace.SAMPLE_SECONDS / 3600
    return int(round(hours * 3600 / trace.SAMPLE_SECONDS / args.samples_per_round))


def _list_traces(as_json: bool) -> int:
    """The packaged traces, as `--trace` names them."""
    step = trace.SAMPLE_SECONDS
    loaded = {name: trace.load(name) for name in trace.PACKAGED}
    rows = [
        {"trace": name, "days": t.samples / trace.SAMPLES_PER_DAY, "vms": len(t.vm_ids), "sample_s": step}
        for name, t in loaded.items()
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'trace':<18} {'days':>5} {'VMs':>5} {'sample':>7}")
    for row in rows:
        print(f"{row['trace']:<18} {row['days']:>5g} {row['vms']:>5} {row['sample_s']:>6}s")
    return 0


def _replay_table(result: replay.Replay, out: dict[str, Any], trace_name: str) -> str:
    s = result.settings
    q = out["imbalance"]
    m = out["migrations"]
    most = out["most_moves_of_one_guest"]
    within = out["share_within_threshold_after_first_hour"]
    lines = [
        f"replay of {trace_name}: {out['rounds']} rounds, {out['trace_hours']:.1f} h of trace, "
        f"{out['runtime_s']:.1f} s",
        f"policy: mode {s.mode}, objective {s.objective}, forecast {s.forecast}, method {s.method}, "
        f"threshold {s.threshold:g}, hold {s.hold_duration}, margin {s.margin:g}, scale {s.imbalance_scale}",
        "",
        f"{'hour':>4} {'mean':>7} {'max':>7} {'migrations':>10}",
    ]
    lines += [f"{h:>4} {mean:>7.3f} {top:>7.3f} {count:>10}" for h, mean, top, count in replay.hourly(result)]
    lines += [
        "",
        "imbalance  " + "  ".join(f"{name} {q[name]:.3f}" for name, _ in replay.QUANTILES),
        f"above threshold {s.threshold:g}: {out['share_above_threshold']:.1%} of rounds",
        "at or below threshold after the first hour: "
        + (f"{within:.1%} of rounds" if within is not None else "- (the replay is not longer than an hour)"),
        f"migrations: {m['started']} started, {m['done']} done, {m['failed']} failed, {m['running']} still running; "
        f"{m['per_day']:.1f} a day, {out['gib_moved_per_day']:.1f} GiB moved a day",
        f"ping-pong moves (A→B→A within an hour): {out['ping_pongs']} ({out['ping_pongs_per_day']:.1f} a day)",
        f"most moves of one guest: {most['moves']}" + (f" ({most['guest']})" if most["guest"] else ""),
        "guest-minutes under pressure (CPU or memory stall above the limit): "
        f"{out['guest_minutes_under_pressure']:.0f}",
    ]
    lacked = [f"the cluster as a whole lacked {RESOURCES[f['resource']]}: {f['text']}" for f in out["shortfall"]]
    lines += lacked or ["the cluster as a whole had the CPU and memory at every round"]
    if f := out["forecast"]:
        lines.append(
            f"next-hour peak per guest, mean absolute error over {f['guest_hours']} guest-hours (day 2 on): "
            f"seasonal (p{f['percentile']:g} of the same hour, up to {f['days_back']} days) "
            f"{f['cpu_cores']['seasonal']:.2f} cores / {f['memory_gib']['seasonal']:.2f} GiB, naive (last hour's peak) "
            f"{f['cpu_cores']['naive']:.2f} cores / {f['memory_gib']['naive']:.2f} GiB"
        )
    else:
        lines.append("forecast: not judged (the replayed trace is not longer than a day)")
    if p := out.get("power"):
        lines.append(
            f"power (minimal {p['minimal']:g}, target {p['target']:g}): {p['node_hours_powered_down']:.1f} node-hours "
            f"powered down (at most {p['most_nodes_asleep']} nodes at once), {p['power_downs']} power-downs, "
            f"{p['wakeups']} wake-ups; {p['power_migrations']} power migrations ({p['power_gib_moved']:.0f} GiB), "
            f"{p['balancing_migrations']} balancing migrations"
        )
    lines += [
        "",
        f"{'day':>3} {'pressure min':>12} {'migrations':>10} {'above threshold':>15} {'GiB moved':>9}",
    ]
    lines += [
        f"{d['day']:>3} {d['guest_minutes_under_pressure']:>12.0f} {d['migrations']:>10} "
        f"{d['rounds_above_threshold']:>15.1%} {d['gib_moved']:>9.0f}"
        for d in out["days"]
    ]
    return "\n".join(lines)
