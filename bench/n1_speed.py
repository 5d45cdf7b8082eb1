"""N+1 and capacity --n1 at growing cluster sizes (synthetic static clusters, 20 guests per node).

    python -m bench.n1_speed [NODES ...]    # default: 50 200 1000

Prints seconds for the full report (`crs.n1.n1`), the verdict alone (`crs.n1.survives`,
what capacity's bisection asks) and `capacity(..., n1_safe=True)` for one 4c,8g size.
"""

from __future__ import annotations

import sys
import time

from bench.make_snapshot import synthetic
from crs.capacity import capacity, parse_size
from crs.n1 import n1, survives
from crs.snapshot import parse


def timed(call, *args, **kwargs):
    start = time.perf_counter()
    result = call(*args, **kwargs)
    return result, time.perf_counter() - start


def main(sizes: list[int]) -> None:
    print("| nodes × guests | n1 report | verdict only | capacity --n1 (4c,8g) |")
    print("| --- | --- | --- | --- |")
    for nodes in sizes:
        snap = parse(synthetic(nodes, nodes * 20, mode="static"))
        report, t_report = timed(n1, snap)
        verdict, t_verdict = timed(survives, snap)
        assert verdict == report.survives
        fitted, t_capacity = timed(capacity, snap, parse_size("4c,8g"), n1_safe=True)
        print(
            f"| {nodes} × {nodes * 20} | {t_report:.2f} s | {t_verdict:.2f} s "
            f"| {t_capacity:.2f} s ({fitted.count} guests) |",
            flush=True,
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [50, 200, 1000])
