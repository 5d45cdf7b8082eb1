"""`python -m crs plan|score|replay|export`: the engine on a snapshot file, for admins and scripts.

A thin shell: parse arguments, call the engine, print. Exit 0 for any decision, 2 for
input the engine refused (message on stderr), as the file contract says.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from typing import cast

from .. import balancer, placement, snapshot
from ..decision import RoundResult
from ..errors import CrsError
from ..model import FORECAST_USES, OBJECTIVES, Snapshot
from . import options

# The other commands, each a module of crs.programs with `add_arguments` and `run`. Only the
# command given is imported: `check` pulls requests and `replay` the simulator and its traces,
# 0.15 s of every `plan`'s start-up when all were loaded (issue 35).
PROGRAMS = {
    "replay": "replay a trace through the engine: how would these settings have behaved?",
    "export": "export a cluster's current snapshot as crs-snapshot/1 JSON, from any source",
    "n1": "N+1: would the cluster survive losing any one node, and where its guests would go",
    "capacity": "how many more guests of a size fit, and why the next does not",
    "check": "test a connection to a cluster: reach, TLS, token, privileges",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser(argv).parse_args(argv)
    try:
        return cast(int, args.handler(args))
    except CrsError as exc:  # refused input, or an unreachable or refused source
        print(f"crs: {exc}", file=sys.stderr)
        return 2


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m crs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="what a balancing round would do with this snapshot")
    p.add_argument("snapshot", help="crs-snapshot/1 JSON file")
    p.add_argument("--json", action="store_true", help="print the crs-plan/1 JSON contract")
    p.add_argument(
        "--steps",
        type=options.number(1, whole=True),
        default=None,
        help="preview the planner rounds use with a budget of K moves (down to the file's target imbalance)",
    )
    p.add_argument("--objective", choices=OBJECTIVES, help="even, pressure or both, instead of the file's objective")
    p.add_argument(
        "--forecast", choices=FORECAST_USES, help="on: plans read the guests' forecast peaks; instead of the file's"
    )
    p.set_defaults(handler=_plan)
    s = sub.add_parser("score", help="rank the nodes for placing one guest")
    s.add_argument("snapshot")
    s.add_argument("sid", help="guest id, e.g. vm:101")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=_score)
    command = next((a for a in argv if not a.startswith("-")), None)
    for name, summary in PROGRAMS.items():
        program = sub.add_parser(name, help=summary)
        if name == command:
            module = importlib.import_module(f".{name}", __package__)
            module.add_arguments(program)
            program.set_defaults(handler=module.run)
    return parser


def _plan(args: argparse.Namespace) -> int:
    snap = snapshot.load_file(args.snapshot)
    overrides = {k: getattr(args, k) for k in ("objective", "forecast") if getattr(args, k)}
    if overrides:
        snap = snap.with_settings(dataclasses.replace(snap.settings, **overrides))
    result = balancer.plan(snap, steps=args.steps)
    if args.json:
        print(json.dumps(result.to_plan_dict(steps=args.steps is not None), indent=2))
    else:
        print(_plan_table(snap, result, args.steps is not None))
    return 0


def _plan_table(snap: Snapshot, result: RoundResult, with_steps: bool) -> str:
    s = snap.settings
    lines = [
        f"cluster {snap.cluster or '-'}: mode {s.mode}, objective {s.objective}, method {s.method}, "
        f"scale {s.imbalance_scale}",
        "",
        f"{'node':<16} {'load':>7}",
    ]
    lines += [f"{name:<16} {load:>7.1%}" for name, load in result.node_loads.items()]
    lines += [
        "",
        f"imbalance {result.imbalance:.4f} (threshold {s.threshold:.2f}, margin {s.margin:.0%}), "
        f"{result.candidates} candidate moves",
        f"decision: {result.decision}",
    ]
    for i, step in enumerate(result.plan, 1):
        move = step.move
        lines.append(
            f"  {i}. {' + '.join(move.guests)}: {move.source} -> {move.target}, imbalance after "
            f"{move.imbalance_after:.4f} (gain {move.relative_gain:.1%})"
            + (f"; else {', '.join(step.alternatives)}" if with_steps and step.alternatives else "")
        )
    lines.append(result.explanation.reason)
    return "\n".join(lines)


def _score(args: argparse.Namespace) -> int:
    snap = snapshot.load_file(args.snapshot)
    try:
        snap.guest(args.sid)
    except KeyError:
        raise CrsError(f"sid: {args.sid!r} is not a guest of this snapshot") from None
    scores = placement.score_nodes(snap, args.sid)
    ranked = sorted(scores, key=lambda n: (scores[n], n))
    chosen = placement.select_node(snap, args.sid)
    if args.json:
        print(
            json.dumps(
                {
                    "sid": args.sid,
                    "mode": snap.settings.mode,
                    "selected": chosen,
                    "ranking": [{"node": n, "score": scores[n]} for n in ranked],
                },
                indent=2,
            )
        )
        return 0
    print(f"placement of {args.sid} ({snap.settings.mode} mode; lower score is better)")
    for i, node in enumerate(ranked, 1):
        print(f"{i:>3}. {node:<16} {scores[node]:+.6f}{'  <- selected' if node == chosen else ''}")
    if chosen is None:
        print("no node is allowed by the rules")
    return 0
