"""The imbalance figure: how unevenly load is spread over the nodes.

It is the coefficient of variation (population SD ÷ mean) of node loads. On the
`normalized` scale (the default, as Proxmox since resource-scheduling 2.1) it is divided
by its maximum √(N−1), so 0 = all nodes equal and 1 = one node carries everything, and
one threshold means the same on 3 nodes and on 30. `raw` is the plain CV of
pve-ha-manager 5.2.0, kept so its tests replay exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

TRUNCATION = 1e15  # Proxmox compares imbalances on 15 significant decimals (f64::DIGITS)


def imbalance(loads: Sequence[float], scale: str = "normalized") -> float:
    """Exact, in Proxmox's operation order (left-to-right sums), so ties split alike."""
    count = len(loads)
    total = 0.0
    for load in loads:
        total += load
    if count < 2 or total == 0.0:
        return 0.0  # nothing to balance; also avoids 0/0
    mean = total / count
    squared = 0.0
    for load in loads:
        squared += (load - mean) ** 2
    cv = math.sqrt(squared / count) / mean
    return cv / math.sqrt(count - 1) if scale == "normalized" else cv


def truncated(value: float) -> float:
    """Drop digits below the 15th, so float noise never decides between two moves."""
    return math.trunc(value * TRUNCATION) / TRUNCATION


def relative_gain(before: float, after: float) -> float:
    """Improvement as a fraction of the current imbalance; the margin is compared to this."""
    return (before - after) / before if before > 0.0 else 0.0


class MoveEvaluator:
    """Imbalance after many single moves, each in O(1), from per-node sums.

    A move changes the load of two nodes only, so with Σd and Σd² (d = load minus the
    current mean, which keeps cancellation small) the new mean and variance follow
    without touching the other N−2 nodes. The result is approximate to ~1e-15; callers
    re-check the best candidates with `imbalance()` so decisions stay bit-exact.
    """

    def __init__(self, loads: np.ndarray, scale: str) -> None:
        self.count = loads.size
        self.shift = float(loads.mean()) if loads.size else 0.0
        d = loads - self.shift
        self.sum_d = float(d.sum())
        self.sum_d2 = float((d * d).sum())
        self.scale = scale
        self.loads = loads

    def after(self, src: np.ndarray, src_load: np.ndarray, tgt: np.ndarray, tgt_load: np.ndarray) -> np.ndarray:
        """Imbalance after replacing loads[src] by src_load and loads[tgt] by tgt_load."""
        n = self.count
        if n < 2:
            return np.zeros(np.broadcast(src_load, tgt_load).shape)
        old_s = self.loads[src] - self.shift
        old_t = self.loads[tgt] - self.shift
        new_s = src_load - self.shift
        new_t = tgt_load - self.shift
        s1 = self.sum_d - old_s - old_t + new_s + new_t
        s2 = self.sum_d2 - old_s * old_s - old_t * old_t + new_s * new_s + new_t * new_t
        mean = self.shift + s1 / n
        var = np.maximum(s2 / n - (s1 / n) ** 2, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            cv = np.where(mean > 0.0, np.sqrt(var) / mean, 0.0)
        return cv / math.sqrt(n - 1) if self.scale == "normalized" else cv
