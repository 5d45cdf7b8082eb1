"""What a rolling maintenance's step costs the worker at the demo size: the N+1 check before a
node goes down (crs.rolling.breaks_n1: the verdict now and with the node emptied) against one
N+1 verdict (the baseline rounds already pay once a minute), and the order with groups of two.

Run: .venv/bin/python -m bench.rolling_check
"""

from __future__ import annotations

import time

import crs.sources
from bench.results import record
from crs.n1 import n1
from crs.rolling import breaks_n1, groups, order


def best_of(runs: int, work) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    snapshot = crs.sources.open_source("simulator", {}).collect(0.0)  # the demo: 12 nodes, 416 guests
    first, largest = order(snapshot)[0], order(snapshot)[-1]
    baseline = best_of(5, lambda: n1(snapshot))
    print(f"{len(snapshot.nodes)} nodes, {len(snapshot.guests)} guests; best of 5, wall")
    print(f"one N+1 verdict (baseline): {baseline * 1000:.0f} ms")
    figures = []
    for node in (first, largest):
        took = best_of(5, lambda node=node: breaks_n1(snapshot, [node]))
        print(f"N+1 check before {node} goes down: {took * 1000:.0f} ms ({took / baseline:.2f} × baseline)")
        figures.append(f"before {node} goes down {took * 1000:.0f} ms ({took / baseline:.2f}×)")
    took = best_of(5, lambda: groups(snapshot, None, 2))
    print(f"order and groups of two over every node: {took * 1000:.0f} ms ({took / baseline:.2f} × baseline)")
    figures.append(f"order and groups of two {took * 1000:.0f} ms ({took / baseline:.2f}×)")
    record(
        "rolling-check-demo",
        f"a rolling maintenance step's N+1 check, the demo cluster, against one verdict ({baseline * 1000:.0f} ms)",
        "; ".join(figures),
    )


if __name__ == "__main__":
    main()
