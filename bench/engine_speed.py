"""Engine speed and memory: whole `python -m crs plan` processes at scale, and the
vectorized move scoring against Proxmox's direct per-candidate recompute, side by side.

Run: .venv/bin/python bench/engine_speed.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_snapshot import synthetic  # noqa: E402

from crs.bundles import movable_bundles  # noqa: E402
from crs.imbalance import imbalance, truncated  # noqa: E402
from crs.moves import Cluster, best_bruteforce  # noqa: E402
from crs.rules import compile_rules  # noqa: E402
from crs.snapshot import parse  # noqa: E402
from crs.usage import node_stats  # noqa: E402


def whole_process(path: str, repeat: int) -> tuple[float, float, dict]:
    """Best wall time (s) and peak RSS (MB) of `python -m crs plan --json` over `repeat` runs."""
    best, peak, plan = float("inf"), 0.0, {}
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "crs", "plan", path, "--json"],
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parent.parent,
        )
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        best = min(best, time.perf_counter() - start)
        peak = max(peak, usage.ru_maxrss / 1024)
        assert status == 0, status
        plan = json.loads(out)
    return best, peak, plan


def direct_best(cluster: Cluster) -> tuple[float, str, str, str]:
    """Proxmox's way: for every candidate, rebuild all node loads and fold the imbalance."""
    best = None
    for row, bundle in enumerate(cluster.bundles):
        src = int(cluster.src[row])
        cpu_s = max(0.0, cluster.cpu[src] - bundle.cpu)
        mem_s = max(0.0, cluster.mem[src] - bundle.mem)
        for t, name in enumerate(cluster.names):
            if t == src or (bundle.targets is not None and name not in bundle.targets):
                continue
            loads = list(cluster.loads)
            loads[src] = (cpu_s / cluster.maxcpu[src] + mem_s / cluster.maxmem[src]) / 2.0
            loads[t] = (
                (cluster.cpu[t] + bundle.cpu) / cluster.maxcpu[t] + (cluster.mem[t] + bundle.mem) / cluster.maxmem[t]
            ) / 2.0
            key = (truncated(imbalance(loads, cluster.scale)), bundle.leader, bundle.node, name)
            if best is None or key < best:
                best = key
    return best


def cluster_of(nodes: int, guests: int) -> Cluster:
    snap = parse(synthetic(nodes, guests))
    stats = node_stats(snap, "dynamic")
    return Cluster(stats, movable_bundles(snap, compile_rules(snap), "dynamic"), "normalized")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one repeat (CI smoke run)")
    args = parser.parse_args()
    nodes, guests, repeat = (200, 4000, 1) if args.quick else (1000, 20000, 3)

    print("== direct recompute vs O(1) vectorized scoring, 100 nodes x 2000 guests, dynamic, bruteforce")
    cluster = cluster_of(100, 2000)
    start = time.perf_counter()
    fast = best_bruteforce(cluster)
    fast_s = time.perf_counter() - start
    start = time.perf_counter()
    direct = direct_best(cluster)
    direct_s = time.perf_counter() - start
    same = direct == (fast.imbalance_after, fast.bundle.leader, fast.bundle.node, fast.target)
    print(
        f"candidates {cluster.candidate_count():,}; direct {direct_s:.3f} s, vectorized {fast_s:.4f} s, "
        f"speed-up {direct_s / fast_s:.0f}x; same move and bits: {same}"
    )
    assert same, (direct, fast)

    with tempfile.TemporaryDirectory() as tmp:
        for method in ("bruteforce", "topsis"):
            path = os.path.join(tmp, f"{method}.json")
            Path(path).write_text(json.dumps(synthetic(nodes, guests, "dynamic", method)))
            seconds, rss, plan = whole_process(path, repeat)
            print(
                f"== whole `python -m crs plan`, {nodes} nodes x {guests} guests, dynamic, {method}: "
                f"{seconds:.2f} s (best of {repeat}), peak RSS {rss:.0f} MB, {plan['candidates']:,} candidates, "
                f"decision {plan['decision']}"
            )
        baseline = os.path.join(tmp, "parse.json")
        Path(baseline).write_text(json.dumps(synthetic(nodes, guests)))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import numpy"], check=True)
        print(f"   (of which interpreter + NumPy start-up: {time.perf_counter() - start:.2f} s)")


if __name__ == "__main__":
    main()
