"""`python -m crs capacity SNAPSHOT --size 4c,8g`: how many more guests of a size fit, and why the next does not."""

from __future__ import annotations

import argparse
import json

from ..capacity import GIB, Size, capacity, parse_size, tiered
from ..errors import CrsError
from ..fits import Limits
from ..snapshot import load_file

HELP = (
    "A node takes a guest while its guests' configured memory stays within its RAM less the "
    "memory reserve, and their configured cores within its CPU threads times the CPU overcommit "
    "ratio (default 4.0, Ganeti's vcpu_ratio). Each new guest goes to the node with the most "
    "memory left. --n1 keeps the loss of any one node recoverable (crs n1)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = HELP
    parser.add_argument("snapshot", help="crs-snapshot/1 JSON file")
    parser.add_argument("--size", type=_size_option, help="cores and memory of one new guest, e.g. 4c,8g (m, g, t)")
    parser.add_argument("--like", metavar="SID", help="the new guests share this guest's node rules")
    parser.add_argument("--n1", action="store_true", help="keep every node's loss recoverable")
    parser.add_argument("--tiered", action="store_true", help="from the largest guest down, halving what ran out")
    parser.add_argument("--cpu-overcommit", type=float, default=Limits().cpu_overcommit, help="cores per CPU thread")
    parser.add_argument("--memory-reserve", type=float, default=0.0, help="bytes kept free on every node")
    parser.add_argument("--json", action="store_true", help="print the crs-capacity/1 JSON")


def _size_option(text: str) -> Size:
    try:
        return parse_size(text)
    except CrsError as exc:  # a bad option is argparse's to report (usage, exit 2)
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    snapshot = load_file(args.snapshot)
    limits = Limits(args.memory_reserve, args.cpu_overcommit)
    if args.size is None and not args.tiered:
        raise CrsError("--size: give the size of one new guest, e.g. 4c,8g (or --tiered)")
    size = args.size or Size(1, 2**30)
    first = capacity(snapshot, size, limits, args.like, n1_safe=args.n1) if args.size else None
    tiers = tiered(snapshot, limits, args.like) if args.tiered else []
    shown = first or tiers[0]
    if args.json:
        body = {
            "format": "crs-capacity/1",
            "size": shown.size.as_json(),
            "n1": args.n1,
            "count": shown.count,
            "limited_by": shown.limited_by,
            "per_node": shown.per_node,
            "overcommitted": shown.overcommitted,
        }
        if args.tiered:
            body["tiers"] = [{"size": t.size.as_json(), "count": t.count} for t in tiers]
        print(json.dumps(body, indent=2))
        return 0
    for tier in ([first] if first else []) + tiers:
        size_text = f"{tier.size.cores:g} cores, {tier.size.memory_bytes / GIB:g} GiB"
        why = ", ".join(f"{n} {r}" for r, n in tier.limited_by.items() if n)
        print(f"{tier.count} more guests of {size_text} fit" + (f"; the next is refused by {why}" if why else ""))
    for node, reason in sorted(shown.overcommitted.items()):
        print(f"note: {node} is already beyond its {reason} limit")
    return 0
