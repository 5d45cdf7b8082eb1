"""`crs capacity cluster.json --size 4c,8g --n1` at 1000 nodes × 20 000 guests (target: under 5 s),
and the batch N+1 path against the straightforward one (bisection, `crs.n1.survives` per step)
on a smaller cluster in the same run, so the ratio holds on a loaded machine.

    python -m bench.capacity_speed [NODES [SMALL_NODES]]    # default: 1000 50

Synthetic static clusters (bench/make_snapshot.py, 20 guests per node), written to a file and
read by the command line as an admin would run it; both paths must give the same count.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import time
from unittest import mock

import crs.n1_batch
from bench.make_snapshot import synthetic
from crs.programs.cli import main as crs_main


def command_line(nodes: int, *, straightforward: bool = False) -> tuple[int, float, float]:
    """(count, seconds of the command, CPU seconds) for one cluster; `straightforward`: with the
    batch switched off, so capacity bisects with `survives` as before."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(synthetic(nodes, nodes * 20, mode="static"), handle)
    out = io.StringIO()
    switch = mock.patch.object(crs.n1_batch, "prepare", return_value=None) if straightforward else None
    try:
        with switch or contextlib.nullcontext(), contextlib.redirect_stdout(out):
            wall, cpu = time.perf_counter(), time.process_time()
            crs_main(["capacity", handle.name, "--size", "4c,8g", "--n1", "--json"])
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        os.unlink(handle.name)
    return json.loads(out.getvalue())["count"], wall, cpu


def main(nodes: int, small: int) -> None:
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores; other jobs inflate wall seconds)")
    print("| cluster | path | count | wall | CPU |")
    print("| --- | --- | ---: | ---: | ---: |")
    timings = {}
    for size, straightforward in ((small, True), (small, False), (nodes, False)):
        count, wall, cpu = command_line(size, straightforward=straightforward)
        path = "bisection + survives (before)" if straightforward else "batch N+1 (now)"
        timings[size, straightforward] = (count, wall, cpu)
        print(f"| {size} × {size * 20} | {path} | {count} | {wall:.2f} s | {cpu:.2f} s |", flush=True)
    (old_count, old_wall, old_cpu), (new_count, new_wall, new_cpu) = timings[small, True], timings[small, False]
    assert old_count == new_count, "both paths must count alike"
    print(f"ratio at {small} × {small * 20}: {old_wall / new_wall:.1f}× wall, {old_cpu / new_cpu:.1f}× CPU")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(args[0] if args else 1000, args[1] if len(args) > 1 else 50)
