"""TOPSIS: rank alternatives by closeness to the ideal and distance from the worst.

Exactly Proxmox's variant (proxmox-resource-scheduling `topsis.rs`): vector
normalization per criterion, weights multiply the *difference* before squaring (so they
enter squared), closeness D⁻/(D⁺+D⁻), and a stable ranking so ties keep input order.
Every sum is a left-to-right fold, as in Rust (NumPy's pairwise `sum` and Python 3.12's
compensated `sum()` round differently and would split ties Proxmox does not split);
`cumsum` and `np.add.at` are such folds. Alternatives may arrive in chunks (millions of candidate
moves) or as one small matrix (placement over a handful of nodes). Pure math.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import CrsError


@dataclass(frozen=True, slots=True)
class Ideals:
    norm: np.ndarray  # per criterion: L2 norm over all alternatives (0 = leave column as is)
    best: np.ndarray  # normalized ideal value per criterion
    worst: np.ndarray
    low: np.ndarray  # lowest raw value per criterion (a floor under any alternative's)


def normalized_weights(raw_weights: tuple[float, ...]) -> np.ndarray:
    total = 0.0
    for w in raw_weights:
        total += abs(w)
    if total == 0.0 or not np.isfinite(total):
        raise CrsError(f"topsis weights {list(raw_weights)!r}: their absolute sum must be finite and > 0")
    return np.array([abs(w) / total for w in raw_weights])


def ideals(chunks: Iterable[np.ndarray], raw_weights: tuple[float, ...]) -> Ideals | None:
    """One pass over all alternatives: column norms (folded in order) and ideal values."""
    width = len(raw_weights)
    squares, low, high, seen = np.zeros(width), np.full(width, np.inf), np.full(width, -np.inf), False
    column_of = np.zeros(0, dtype=np.intp)  # 0, 1, …, width − 1 repeated: each value's column
    for chunk in chunks:
        if chunk.shape[0] == 0:
            continue
        seen = True
        # Each square added to its column's sum in turn, continuing the fold so far: `add.at`
        # is unbuffered and goes through the values in order, and with the squares laid out
        # row by row the columns' folds run side by side (a third of a `cumsum` per column).
        values = np.empty(chunk.shape)
        for j in range(width):
            np.multiply(chunk[:, j], chunk[:, j], out=values[:, j])
        if column_of.size < values.size:
            column_of = np.tile(np.arange(width), chunk.shape[0])
        np.add.at(squares, column_of[: values.size], values.ravel())
        low, high = np.minimum(low, chunk.min(axis=0)), np.maximum(high, chunk.max(axis=0))
    if not seen:
        return None
    norm = np.sqrt(squares)
    scale = np.where(norm != 0.0, norm, 1.0)
    raw_low = low
    low, high = low / scale, high / scale  # dividing by a positive norm keeps the order
    minimize = np.array([w < 0 for w in raw_weights])
    return Ideals(norm, np.where(minimize, low, high), np.where(minimize, high, low), raw_low)


def closeness(chunk: np.ndarray, columns: Ideals, weights: np.ndarray) -> np.ndarray:
    """Closeness of each row against the ideals of all alternatives (`weights` normalized).
    Where a criterion is minimized, a smaller value between the ideals never lowers it: each
    step is a rounded monotone operation, so a caller may bound a row's closeness from floors
    under its criteria."""
    normalized = (
        (chunk[:, j] / columns.norm[j] if columns.norm[j] != 0.0 else chunk[:, j], columns.best[j], columns.worst[j])
        for j in range(len(weights))
    )
    return _closeness(normalized, weights, (chunk.shape[0],))


def _closeness(
    normalized: Iterable[tuple[np.ndarray, np.ndarray | float, np.ndarray | float]],
    weights: np.ndarray,
    shape: tuple[int, ...],
) -> np.ndarray:
    """Proxmox's closeness D⁻/(D⁺+D⁻) from each criterion's normalized values and its ideal
    and anti-ideal (scalars, or one per decision for `scores_columns`), in criterion order:
    each distance is the left fold of ((x − ideal) · weight)², then its square root; all
    alternatives equal (both distances 0) score 0. In place, so no new array per step."""
    d_best, d_worst, scratch = np.zeros(shape), np.zeros(shape), np.empty(shape)
    for (column, best, worst), weight in zip(normalized, weights, strict=True):
        for ideal, distance in ((best, d_best), (worst, d_worst)):
            np.subtract(column, ideal, out=scratch)
            scratch *= weight
            scratch *= scratch
            distance += scratch
    d_best, d_worst = np.sqrt(d_best), np.sqrt(d_worst)
    denominator = d_worst + d_best
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(denominator != 0.0, d_worst / denominator, 0.0)
    if not np.isfinite(out.sum()):  # a NaN or infinity anywhere makes the sum one
        raise CrsError("topsis produced a non-finite score")
    return out


def scores(matrix: np.ndarray, raw_weights: tuple[float, ...]) -> np.ndarray:
    """Closeness S_i in [0, 1] of each row (alternative); higher is better. A negative raw
    weight means the criterion is minimized. One alternative alone scores 0."""
    weights = normalized_weights(raw_weights)
    matrix = np.asarray(matrix, dtype=float)
    columns = ideals([matrix], raw_weights)
    return np.zeros(0) if columns is None else closeness(matrix, columns, weights)


def rank(matrix: np.ndarray, raw_weights: tuple[float, ...]) -> np.ndarray:
    """Row indices, best first; equal scores keep their input order (stable sort)."""
    return np.argsort(-scores(matrix, raw_weights), kind="stable")


def best(chunks: Callable[[], Iterable[np.ndarray]], raw_weights: tuple[float, ...]) -> int | None:
    """Index of the best alternative over all chunks (the first of equals), in two passes
    so that memory holds one chunk at a time; `chunks()` must yield the same rows twice."""
    weights = normalized_weights(raw_weights)
    columns = ideals(chunks(), raw_weights)
    if columns is None:
        return None
    best_index, best_score, offset = None, -np.inf, 0
    for chunk in chunks():
        if chunk.shape[0]:
            s = closeness(chunk, columns, weights)
            i = int(np.argmax(s))  # first maximum: stable
            if s[i] > best_score:
                best_index, best_score = offset + i, float(s[i])
        offset += chunk.shape[0]
    return best_index


def scores_columns(columns: Sequence[np.ndarray], raw_weights: tuple[float, ...]) -> np.ndarray:
    """`scores` for many independent decisions at once: `columns[j][i, d]` is criterion j of
    alternative i in decision d (at least two decisions), each decision normalized and scored
    on its own. N+1 recovers every lost node side by side this way. Each operation is the one
    `scores` does, in the same order: summing down the first axis of a C-ordered matrix with
    two or more columns is NumPy's element-wise left fold, like `cumsum` (tests check it
    against `scores` bit for bit; a lone column would be summed pairwise)."""
    return _closeness(
        (_normalized_column(column, raw) for column, raw in zip(columns, raw_weights, strict=True)),
        normalized_weights(raw_weights),
        columns[0].shape,
    )


def _normalized_column(column: np.ndarray, raw_weight: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One criterion of `scores_columns`: (values over their norm, ideal, anti-ideal) per decision."""
    squares = np.empty(column.shape)  # C-ordered whatever the input's order: summed down by a left fold
    norm = np.sqrt(np.multiply(column, column, out=squares).sum(axis=0))
    scale = np.where(norm != 0.0, norm, 1.0)  # x / 1.0 is x: the unnormalized column as is
    low, high = column.min(axis=0) / scale, column.max(axis=0) / scale
    best, worst = (low, high) if raw_weight < 0 else (high, low)
    return column / scale, best, worst
