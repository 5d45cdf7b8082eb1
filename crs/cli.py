"""`python -m crs plan|score|replay|export`: the engine on a snapshot file, for admins and scripts.

A thin shell: parse arguments, call the engine, print. Exit 0 for any decision, 2 for
input the engine refused (message on stderr), as the file contract says.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from . import balancer, placement, snapshot
from .errors import CrsError
from .model import Snapshot
from .sources.base import SourceError

# Subcommands provided by other modules: name → module with add_arguments(parser) and run(args).
EXTENSIONS = {"replay": "crs.replay", "export": "crs.export", "n1": "crs.n1"}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.handler(args)
    except (CrsError, SourceError) as exc:  # refused input or an unreachable / refused source
        print(f"crs: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m crs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="what a balancing round would do with this snapshot")
    p.add_argument("snapshot", help="crs-snapshot/1 JSON file")
    p.add_argument("--json", action="store_true", help="print the crs-plan/1 JSON contract")
    p.add_argument("--steps", type=_positive, default=None, help="plan up to K moves, each applied before the next")
    p.set_defaults(handler=_plan)
    s = sub.add_parser("score", help="rank the nodes for placing one guest")
    s.add_argument("snapshot")
    s.add_argument("sid", help="guest id, e.g. vm:101")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=_score)
    for name, module_name in EXTENSIONS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        e = sub.add_parser(name, help=(module.__doc__ or "").strip().splitlines()[0])
        module.add_arguments(e)
        e.set_defaults(handler=module.run)
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"--steps {text}: must be a whole number >= 1")
    return value


def _plan(args: argparse.Namespace) -> int:
    snap = snapshot.load_file(args.snapshot)
    result = balancer.plan(snap, steps=args.steps or 1)
    if args.json:
        print(json.dumps(result.to_plan_dict(steps=args.steps is not None), indent=2))
    else:
        print(_plan_table(snap, result, args.steps is not None))
    return 0


def _plan_table(snap: Snapshot, result, with_steps: bool) -> str:
    s = snap.settings
    lines = [
        f"cluster {snap.cluster or '-'}: mode {s.mode}, method {s.method}, scale {s.imbalance_scale}",
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
    for i, move in enumerate(result.moves if with_steps else ([result.move] if result.move else []), 1):
        lines.append(
            f"  {i}. {' + '.join(move.guests)}: {move.source} -> {move.target}, imbalance after "
            f"{move.imbalance_after:.4f} (gain {move.relative_gain:.1%})"
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
