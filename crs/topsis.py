"""TOPSIS: rank alternatives by closeness to the ideal and distance from the worst.

Exactly Proxmox's variant (proxmox-resource-scheduling `topsis.rs`): vector
normalization per criterion, weights multiply the *difference* before squaring (so they
enter squared), closeness D⁻/(D⁺+D⁻), and a stable ranking so ties keep input order.
Every sum is a left-to-right fold, as in Rust (NumPy's pairwise `sum` and Python 3.12's
compensated `sum()` round differently and would split ties Proxmox does not split);
`cumsum` is such a fold. One array implementation serves placement (a handful of nodes)
and the balancing method (millions of candidate moves). Pure math.
"""

from __future__ import annotations

import numpy as np

from .errors import CrsError


def _normalized_weights(raw_weights: tuple[float, ...]) -> list[float]:
    total = 0.0
    for w in raw_weights:
        total += abs(w)
    if total == 0.0 or not np.isfinite(total):
        raise CrsError(f"topsis weights {list(raw_weights)!r}: their absolute sum must be finite and > 0")
    return [abs(w) / total for w in raw_weights]


def scores(matrix: np.ndarray, raw_weights: tuple[float, ...]) -> np.ndarray:
    """Closeness S_i in [0, 1] of each row (alternative); higher is better.

    A negative raw weight means the criterion is minimized. With a single alternative,
    or when all alternatives are equal, every score is 0.
    """
    weights = _normalized_weights(raw_weights)
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape[0] == 0:
        return np.zeros(0)
    columns = []
    for j in range(len(weights)):
        column = matrix[:, j]
        norm = float(np.sqrt(np.cumsum(column * column)[-1]))
        columns.append(column / norm if norm != 0.0 else column)
    d_best = np.zeros(matrix.shape[0])
    d_worst = np.zeros(matrix.shape[0])
    for column, weight, raw in zip(columns, weights, raw_weights):
        low, high = column.min(), column.max()
        best, worst = (low, high) if raw < 0 else (high, low)
        to_best = (column - best) * weight
        to_worst = (column - worst) * weight
        d_best += to_best * to_best
        d_worst += to_worst * to_worst
    d_best, d_worst = np.sqrt(d_best), np.sqrt(d_worst)
    denominator = d_worst + d_best
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(denominator != 0.0, d_worst / denominator, 0.0)
    if not np.all(np.isfinite(out)):
        raise CrsError("topsis produced a non-finite score")
    return out


def rank(matrix: np.ndarray, raw_weights: tuple[float, ...]) -> np.ndarray:
    """Row indices, best first; equal scores keep their input order (stable sort)."""
    return np.argsort(-scores(matrix, raw_weights), kind="stable")
