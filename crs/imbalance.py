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

from .model import Snapshot
from .usage import NodeStats, node_stats

TRUNCATION = 1e15  # Proxmox compares imbalances on 15 significant decimals (f64::DIGITS)
# A move or plan must lower the imbalance by more than this fraction of it to gain anything.
# Imbalances carry ~1e-15 of rounding (and are compared on 15 decimals), so less is noise
# that could reverse on recomputation; the smallest real move (one small guest among
# thousands) gains orders of magnitude more.
NOISE = 1e-9


def cluster_imbalance(snapshot: Snapshot, stats: Sequence[NodeStats] | None = None) -> float:
    """The imbalance of `snapshot` under its mode and scale, the figure rounds, plans and
    reports show. `stats`: node figures the caller already holds for it (a round's sums, a
    plan step's figures after the move), instead of summing the snapshot again."""
    settings = snapshot.settings
    figures = node_stats(snapshot, settings.mode) if stats is None else stats
    return imbalance([s.load for s in figures], settings.imbalance_scale)


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
    """Imbalance after many single moves, each in O(1), from per-node sums, for ranking.

    A move changes the load of two nodes only, so with Σd and Σd² (d = load minus the
    current mean, which keeps cancellation small) the new mean and variance follow
    without touching the other N−2 nodes. The figure is the squared raw CV, monotonic
    in the imbalance on either scale, so ranking needs neither the square root nor the
    scale. It is approximate to ~1e-15; callers re-check the best candidates with the
    exact fold so decisions stay bit-exact.
    """

    def __init__(self, loads: np.ndarray) -> None:
        self.count = loads.size
        self.shift = float(loads.mean()) if loads.size else 0.0
        self.d = loads - self.shift
        self.twice_d = 2.0 * self.d
        self.sum_d = float(self.d.sum())
        self.sum_d2 = float((self.d * self.d).sum())

    def squared_after(self, src: np.ndarray, src_load: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """CV² after each move; row r moves load off node src[r] (now src_load[r]) and adds
        delta[r, t] to target t. Overwrites `delta`.

        With a = delta, per row s1 = Σd and s2 = Σd² without the target's change:
        CV² = (n·(s2 + a·(2d + a)) − (s1 + a)²) / (n·shift + s1 + a)². A balancing round
        only scores moves when some node carries load, so the mean is never zero here.
        """
        n = self.count
        old_s = self.d[src]
        new_s = src_load - self.shift
        s1_row = (self.sum_d - old_s + new_s)[:, None]
        s2_row = (self.sum_d2 - old_s * old_s + new_s * new_s)[:, None]
        out: np.ndarray = self.twice_d + delta
        out *= delta
        out += s2_row
        out *= n
        spread = delta + s1_row
        spread *= spread
        out -= spread
        mean = np.add(delta, n * self.shift + s1_row, out=delta)
        mean *= mean
        out /= mean
        return out

    def lower_bound(self, src: np.ndarray, src_load: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """A floor under `squared_after` over every target of each row, in O(1) per row, so a
        search can skip the rows that cannot come near the best move without scoring them.

        Row r adds some a ∈ [low[r], high[r]] (a ≥ 0) to a target whose d is at least the
        smallest d, so the numerator of `squared_after` is at least the convex quadratic
        g(a) = n·(s2 + a·(2·d_min + a)) − (s1 + a)², taken at its lowest point in the range,
        and the denominator at most (n·shift + s1 + high)². Exact arithmetic; callers leave
        room for rounding. Rows whose loads sum to nothing get 0 (never skipped).
        """
        n = self.count
        if n < 2:
            return np.zeros(src.size)
        old_s = self.d[src]
        new_s = src_load - self.shift
        s1 = self.sum_d - old_s + new_s
        s2 = self.sum_d2 - old_s * old_s + new_s * new_s
        d_min = float(self.d.min())
        a = np.clip((s1 - n * d_min) / (n - 1), low, high)
        numerator = n * (s2 + a * (2.0 * d_min + a)) - (s1 + a) ** 2
        denominator = (n * self.shift + s1 + high) ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(denominator > 0.0, np.maximum(numerator, 0.0) / denominator, 0.0)
        return np.nan_to_num(bound, nan=0.0, posinf=0.0)
