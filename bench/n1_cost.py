"""The N+1 verdict's cost at the demo size: why rounds compute it once a minute (dashboard/ha.py
N1_EVERY), not every round.

Run: .venv/bin/python -m bench.n1_cost
"""

from __future__ import annotations

import time

import crs.sources
from bench.results import record
from crs.n1 import n1


def main() -> None:
    snapshot = crs.sources.open_source("simulator", {}).collect(0.0)  # the demo: 12 nodes, 416 guests
    best_wall, best_cpu = float("inf"), float("inf")
    for _ in range(3):
        wall, cpu = time.perf_counter(), time.process_time()
        report = n1(snapshot)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    size = f"{len(snapshot.nodes)} nodes, {len(snapshot.guests)} guests"
    print(f"{size}: best of 3 {best_wall:.2f} s wall, {best_cpu:.2f} s CPU")
    print(report.verdict)
    record(
        "n1-verdict-demo",
        f"one N+1 verdict, the demo cluster ({size})",
        f"{best_wall:.2f} s wall, {best_cpu:.2f} s CPU",
    )


if __name__ == "__main__":
    main()
