"""`crs capacity` against Ganeti's hspace on the same cluster: how many more guests of one size fit.

The clusters are bench/make_snapshot.py's (static mode), written in htools' text format as
bench/hbal_compare.py writes them (shared storage, `ext`; each node keeps no CPU for itself,
as our model). hspace runs with `--no-capacity-checks --accept-existing-errors` (plain
capacity, no N+1: hspace's global N+1 re-places instances with its own allocator, not
Proxmox's recovery placement, and took over five minutes at 12 nodes here) and its
machine-readable count and failure histogram are set beside ours.

Where the models differ: hspace refuses the guest that would leave a node with exactly
0 MiB free (ours fits it: configured memory within RAM), so hspace's count is ours less
one per node whose memory room is an exact multiple of the guest's memory. The script
predicts hspace's count from ours with that rule and checks it.

Needs `hspace` (Debian: apt-get install ganeti-htools); without it, says so and exits 0.
Run: .venv/bin/python -m bench.hspace_compare
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time

from bench.hbal_compare import DISK_MIB, MIB, to_hbal_text
from bench.make_snapshot import synthetic
from crs.capacity import Size, capacity
from crs.model import Snapshot
from crs.snapshot import parse

SIZE = Size(4, 8 * 1024 * MIB)


def run_hspace(snap: Snapshot, size: Size) -> tuple[dict[str, str], float]:
    with tempfile.NamedTemporaryFile("w", suffix=".data") as f:
        f.write(to_hbal_text(snap, host_cpus=0))
        f.flush()
        spec = f"{DISK_MIB},{int(size.memory_bytes // MIB)},{int(size.cores)}"
        began = time.perf_counter()
        done = subprocess.run(
            ["hspace", "-t", f.name, "--standard-alloc", spec, "--disk-template", "ext", "--machine-readable"]
            + ["--no-capacity-checks", "--accept-existing-errors"],
            capture_output=True,
            text=True,
            check=True,
        )
        took = time.perf_counter() - began
    return dict(re.findall(r"^HTS_(\w+)=(.*)$", done.stdout, re.MULTILINE)), took


def exact_fits(snap: Snapshot, per_node: dict[str, int], size: Size) -> int:
    """Nodes our count fills to exactly 0 MiB of memory room: hspace keeps one guest less there."""
    used = {n.name: 0.0 for n in snap.nodes}
    for guest in snap.guests:
        used[guest.node] += guest.memory_bytes
    return sum(
        1 for n in snap.nodes if n.memory_bytes - used[n.name] - per_node.get(n.name, 0) * size.memory_bytes == 0
    )


def main() -> int:
    if not shutil.which("hspace"):
        print("hspace not installed (apt-get install ganeti-htools): skipped")
        return 0
    print("| cluster | ours | refused by (mem/cpu) | hspace | refused by (mem/cpu) | ours − exact fits | hspace time |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    agree = True
    for nodes, guests in ((12, 120), (40, 400)):
        snap = parse(synthetic(nodes, guests, mode="static"))
        ours = capacity(snap, SIZE)
        theirs, took = run_hspace(snap, SIZE)
        predicted = ours.count - exact_fits(snap, ours.per_node, SIZE)
        agree &= predicted == int(theirs["ALLOC_INSTANCES"])
        print(
            f"| {nodes} × {guests} | {ours.count} | {ours.limited_by['memory']}/{ours.limited_by['cpu']} "
            f"| {theirs['ALLOC_INSTANCES']} | {theirs['ALLOC_FAILMEM_CNT']}/{theirs['ALLOC_FAILCPU_CNT']} "
            f"| {predicted} | {took:.1f} s |",
            flush=True,
        )
    print("counts agree once exact fits are discounted" if agree else "COUNTS DISAGREE beyond the exact-fit rule")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
