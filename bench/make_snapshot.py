"""Synthetic crs-snapshot/1 clusters for benchmarks: N nodes of mixed sizes, G guests
with measured usage, placed unevenly so the balancer has real work to do."""

from __future__ import annotations

import json
import sys

import numpy as np


def synthetic(nodes: int, guests: int, mode: str = "dynamic", method: str = "bruteforce", seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    cpus = rng.choice([32, 48, 64, 96], size=nodes)
    memory = rng.choice([128, 256, 384, 512], size=nodes) * 2**30
    weights = np.linspace(2.0, 0.2, nodes)  # uneven: the first nodes carry more
    placement = rng.choice(nodes, size=guests, p=weights / weights.sum())
    cores = rng.choice([1, 2, 4, 8], size=guests)
    mem = rng.choice([2, 4, 8, 16], size=guests) * 2**30
    return {
        "format": "crs-snapshot/1",
        "cluster": f"bench-{nodes}x{guests}",
        "settings": {"mode": mode, "method": method, "threshold": 0.0, "hold_duration": 0, "margin": 0.0},
        "nodes": [{"name": f"node{i:04d}", "cpus": int(cpus[i]), "memory_bytes": int(memory[i])} for i in range(nodes)],
        "guests": [
            {
                "sid": f"vm:{100 + i}",
                "node": f"node{placement[i]:04d}",
                "cores": int(cores[i]),
                "memory_bytes": int(mem[i]),
                "cpu_usage": round(float(cores[i] * rng.uniform(0.05, 0.9)), 3),
                "mem_usage_bytes": int(mem[i] * rng.uniform(0.2, 0.95)),
            }
            for i in range(guests)
        ],
    }


if __name__ == "__main__":
    nodes, guests = int(sys.argv[1]), int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else "dynamic"
    method = sys.argv[4] if len(sys.argv) > 4 else "bruteforce"
    json.dump(synthetic(nodes, guests, mode, method), sys.stdout)
