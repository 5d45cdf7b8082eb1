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
    """Squared imbalance after many single moves, each in O(1), from per-node sums.

    A move changes the load of two nodes only, so with Σd and Σd² (d = load minus the
    current mean, which keeps cancellation small) the new mean and variance follow
    without touching the other N−2 nodes. The result is approximate to ~1e-15; callers
    re-check the best candidates with the exact fold so decisions stay bit-exact.
    Squared, because ranking needs no square root.
    """

    def __init__(self, loads: np.ndarray, scale: str) -> None:
        self.count = loads.size
        self.shift = float(loads.mean()) if loads.size else 0.0
        self.d = loads - self.shift
        self.twice_d = 2.0 * self.d
        self.sum_d = float(self.d.sum())
        self.sum_d2 = float((self.d * self.d).sum())
        self.factor = 1.0 / (self.count - 1) if scale == "normalized" and self.count > 1 else 1.0

    def squared_after(self, src: np.ndarray, src_load: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Imbalance² after each move; row r moves load off node src[r] (now src_load[r])
        and adds delta[r, t] to target t. Overwrites and returns `delta`."""
        n = self.count
        old_s = self.d[src]
        new_s = src_load - self.shift
        s1_row = (self.sum_d - old_s + new_s)[:, None]
        s2_row = (self.sum_d2 - old_s * old_s + new_s * new_s)[:, None]
        s2 = self.twice_d + delta
        s2 *= delta
        s2 += s2_row
        s2 *= 1.0 / n  # E[d²]
        s1 = np.add(delta, s1_row, out=delta)
        s1 *= 1.0 / n  # E[d]
        s2 -= s1 * s1  # variance
        s1 += self.shift  # mean
        s1 *= s1
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(s2, s1, out=s1)
        np.nan_to_num(s1, copy=False, nan=0.0, posinf=0.0)  # a mean of 0 means nothing to balance
        np.maximum(s1, 0.0, out=s1)
        s1 *= self.factor
        return s1
