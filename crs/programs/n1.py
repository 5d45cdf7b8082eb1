"""`python -m crs n1 SNAPSHOT [--json]`: would the cluster survive losing any one node, and where its guests go."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from ..fits import Limits
from ..n1 import n1
from ..snapshot import load_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("snapshot", help="crs-snapshot/1 JSON file")
    parser.add_argument("--json", action="store_true", help="print every loss as JSON")
    parser.add_argument("--cpu-overcommit", type=float, default=Limits().cpu_overcommit, help="cores per CPU thread")
    parser.add_argument("--memory-reserve", type=float, default=0.0, help="bytes kept free on every node")


def run(args: argparse.Namespace) -> int:
    report = n1(load_file(args.snapshot), Limits(args.memory_reserve, args.cpu_overcommit))
    if args.json:
        body = {"survives": report.survives, "verdict": report.verdict, "losses": [asdict(x) for x in report.losses]}
        print(json.dumps(body, indent=2))
        return 0
    for loss in report.losses:
        placed = ", ".join(f"{r.sid} -> {r.target or 'none (' + r.why_lost + ')'}" for r in loss.recoveries)
        print(f"losing {loss.node}: {loss.summary()}" + (f" ({placed})" if placed else ""))
    print(report.verdict)
    return 0
