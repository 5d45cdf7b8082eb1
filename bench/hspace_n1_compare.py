"""`crs capacity --n1` against hspace's global N+1 capacity check on the same cluster.

The closest hspace setup to ours is shared storage (`ext`) with its capacity checks on
(Ganeti ≥ 2.16, `GlobalN1.hs`): a state is redundant when, for every node, its
shared-storage instances can be re-placed on the other nodes. That is our question too
(losing any one node still lets every HA guest be recovered), but the recovery differs:
hspace re-places each instance with its own allocator, only onto a node that still fits
it; Proxmox's HA manager (crs.n1) picks the best-scoring node without checking room, so a
recovery can overload a node that an allocator would have avoided. DRBD does not
compare: there every instance has one fixed secondary that reserves memory for it, and
Proxmox guests have no secondary.

For each cluster the script prints both counts with and without N+1, the refusal
histograms, and then replays hspace's own N+1-safe allocation (its `-S` save file) through
crs.n1: if our check refuses hspace's placement, the gap is the recovery model, not the
allocation order. hspace's N+1 run is slow (tens of seconds at 6 nodes): each run is
capped at --timeout seconds. bench/make_snapshot.py's static clusters, 10 guests a node;
its first node is already over-committed, hence `--accept-existing-errors`.

Needs `hspace` (Debian: apt-get install ganeti-htools); without it, says so and exits 0.
Run: .venv/bin/python -m bench.hspace_n1_compare [--timeout S] [NODES ...]   (default 6 12)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.hbal_compare import MIB, to_hbal_text
from bench.hspace_compare import SIZE
from bench.make_snapshot import synthetic
from crs.capacity import capacity
from crs.n1 import n1
from crs.snapshot import parse

NEW = re.compile(r"^new-(\d+)\|(\d+)\|\d+\|(\d+)\|\w+\|\w\|([^|]+)\|", re.MULTILINE)
HISTOGRAM = ("MEM", "CPU", "N1", "DISK")


def hspace(data: str, n1_checks: bool, timeout: float, save: str) -> tuple[dict[str, str], float, str] | None:
    """hspace's HTS_* answer, its wall time and its saved allocation; None when over `timeout`."""
    checks = ["--accept-existing-errors"] if n1_checks else ["--no-capacity-checks", "--accept-existing-errors"]
    spec = f"1024,{int(SIZE.memory_bytes // MIB)},{int(SIZE.cores)}"
    began = time.perf_counter()
    try:
        done = subprocess.run(
            ["hspace", "-t", data, "--standard-alloc", spec, "--disk-template", "ext", "--machine-readable"]
            + checks
            + ["-S", save],
            capture_output=True,
            text=True,
            check=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None
    took = time.perf_counter() - began
    return dict(re.findall(r"^HTS_(\w+)=(.*)$", done.stdout, re.MULTILINE)), took, Path(save + ".standard").read_text()


def histogram(hts: dict[str, str]) -> str:
    return "/".join(hts.get(f"ALLOC_FAIL{r}_CNT", "0") for r in HISTOGRAM)


def with_hspace_allocation(raw: dict, saved: str) -> dict:
    """The snapshot with hspace's new instances added where it put them (HA-managed, as ours)."""
    new = [
        {"sid": f"vm:{900000 + int(i)}", "node": node, "cores": int(cpu), "memory_bytes": int(mem) * MIB}
        for i, mem, cpu, node in NEW.findall(saved)
    ]
    return raw | {"guests": raw["guests"] + new}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nodes", nargs="*", type=int, default=[6, 12])
    parser.add_argument("--timeout", type=float, default=300.0, help="cap on each hspace run, seconds")
    args = parser.parse_args()
    if not shutil.which("hspace"):
        print("hspace not installed (apt-get install ganeti-htools): skipped")
        return 0
    print(
        "| cluster | ours | ours --n1 (refused by mem/cpu/n1) | hspace, no N+1 (mem/cpu/n1/disk) "
        "| hspace global N+1 (mem/cpu/n1/disk) | hspace time | our N+1 check on hspace's N+1 placement |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for nodes in args.nodes:
        raw = synthetic(nodes, nodes * 10, mode="static")
        snap = parse(raw)
        plain, bound = capacity(snap, SIZE), capacity(snap, SIZE, n1_safe=True)
        ours = f"{bound.count} ({bound.limited_by['memory']}/{bound.limited_by['cpu']}/{bound.limited_by['n1']})"
        with tempfile.TemporaryDirectory() as tmp:
            data = f"{tmp}/cluster.data"
            Path(data).write_text(to_hbal_text(snap, host_cpus=0))
            free = hspace(data, False, args.timeout, f"{tmp}/free")
            safe = hspace(data, True, args.timeout, f"{tmp}/safe")
        free_cell = f"{free[0]['ALLOC_INSTANCES']} ({histogram(free[0])})" if free else "timeout"
        if safe is None:
            safe_cell, took, verdict = "timeout", f"> {args.timeout:.0f} s", "–"
        else:
            safe_cell, took = f"{safe[0]['ALLOC_INSTANCES']} ({histogram(safe[0])})", f"{safe[1]:.0f} s"
            verdict = n1(parse(with_hspace_allocation(raw, safe[2]))).verdict
        print(
            f"| {nodes} × {nodes * 10} | {plain.count} | {ours} | {free_cell} | {safe_cell} | {took} | {verdict} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
