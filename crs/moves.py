"""Score every candidate move of a round, fast, and pick the best one exactly.

Proxmox recomputes all node loads for each candidate: O(candidates × nodes). Here a
candidate changes two nodes, so its imbalance comes from per-node sums in O(1)
(`imbalance.MoveEvaluator`), vectorized over a chunk of bundles × nodes at a time so
memory stays bounded. The few candidates within float noise of the best are then
re-evaluated in Proxmox's exact operation order, so the chosen move and its tie-break
equal the direct computation bit for bit.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from . import topsis
from .bundles import Bundle
from .imbalance import MoveEvaluator, truncated
from .placement import EXACT_TOPSIS_CELLS, WEIGHTS, criteria_after, top_three
from .usage import NodeStats, load

CHUNK_CELLS = 1 << 20  # bundles × nodes evaluated at once (about 8 MB per float array)
# TOPSIS's grid passes hold a dozen such arrays: at 256 KB each they stay in a core's cache,
# which makes each of the ~30 passes over every cell two to three times faster than at 8 MB.
TOPSIS_CHUNK_CELLS = 1 << 15
FLOOR_ROUNDING = 1e-9  # relative room for rounding in a move floor, far above float noise (~1e-15)
CEILING_ROUNDING = 1e-9  # room for rounding in a TOPSIS closeness ceiling (closeness lies in [0, 1])


@dataclass(frozen=True, slots=True)
class Scored:
    bundle: Bundle
    target: str
    imbalance_after: float  # truncated to 15 decimals, as Proxmox compares it


class Cluster:
    """Node arrays (name order) and the bundles that may move, ready for vector math."""

    def __init__(
        self, stats: list[NodeStats], bundles: list[Bundle], scale: str, refused: np.ndarray | None = None
    ) -> None:
        self.names = [s.name for s in stats]
        index = {n: i for i, n in enumerate(self.names)}
        self.cpu = np.array([s.cpu for s in stats], dtype=float)
        self.maxcpu = np.array([s.maxcpu for s in stats], dtype=float)
        self.mem = np.array([s.mem for s in stats], dtype=float)
        self.maxmem = np.array([s.maxmem for s in stats], dtype=float)
        self.loads = load(self.cpu, self.maxcpu, self.mem, self.maxmem)
        self.bundles = bundles
        self.src = np.array([index[b.node] for b in bundles], dtype=np.int64)
        self.bcpu = np.array([b.cpu for b in bundles], dtype=float)
        self.bmem = np.array([b.mem for b in bundles], dtype=float)
        self.allowed_idx = [None if b.targets is None else [index[t] for t in b.targets] for b in bundles]
        self.scale = scale
        self.refused = refused  # bundles × nodes, True where crs.fits refuses the target; None = no check

    def chunks(
        self, order: np.ndarray | None = None, cells: int | None = None
    ) -> Iterator[tuple[np.ndarray, list[tuple[int, list[int]]]]]:
        """(bundle rows, [(row in chunk, allowed target columns)] for constrained rows), about
        `cells` (by default CHUNK_CELLS) bundles × nodes at a time: all rows in order, or the
        rows of `order` in its order. Unconstrained rows may go to any node but their own."""
        n = len(self.names)
        size = max(1, (CHUNK_CELLS if cells is None else cells) // max(n, 1))
        rows = np.arange(len(self.bundles)) if order is None else order
        for start in range(0, rows.size, size):
            part = rows[start : start + size]
            allowed = [self.allowed_idx[i] for i in part.tolist()]
            yield part, [(r, a) for r, a in enumerate(allowed) if a is not None]

    def mask(self, part: np.ndarray, constrained: list[tuple[int, list[int]]]) -> np.ndarray:
        """Allowed (row, target) cells of a chunk."""
        mask = np.ones((part.size, len(self.names)), dtype=bool)
        mask[np.arange(part.size), self.src[part]] = False
        for r, allowed in constrained:
            mask[r] = False
            mask[r, allowed] = True
        if self.refused is not None:
            mask &= ~self.refused[part]
        return mask

    def moved_source(self, rows: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source node, its cpu and memory after the bundle leaves) per bundle row, with
        the same clamped subtraction as Proxmox's remove-running-resource."""
        src = self.src[rows]
        return src, np.maximum(0.0, self.cpu[src] - self.bcpu[rows]), np.maximum(0.0, self.mem[src] - self.bmem[rows])

    def after(self, row: int, col: int) -> Cluster:
        """This cluster once bundle `row` sat on node `col`, with that bundle no longer movable."""
        out = copy.copy(self)
        src = self.src[row]
        out.cpu, out.mem = self.cpu.copy(), self.mem.copy()
        out.cpu[src] = max(0.0, out.cpu[src] - self.bcpu[row])
        out.mem[src] = max(0.0, out.mem[src] - self.bmem[row])
        out.cpu[col] += self.bcpu[row]
        out.mem[col] += self.bmem[row]
        out.loads = load(out.cpu, self.maxcpu, out.mem, self.maxmem)
        refused = np.zeros((len(self.bundles), len(self.names)), dtype=bool) if self.refused is None else self.refused
        out.refused = refused.copy()
        out.refused[row] = True
        return out

    def candidate_count(self) -> int:
        if self.refused is not None:
            return sum(int(self.mask(part, constrained).sum()) for part, constrained in self.chunks())
        n = len(self.names)
        return sum(n - 1 if a is None else len(a) for a in self.allowed_idx)

    def allowed_targets(self, row: int) -> list[int]:
        """Target columns bundle `row` may go to."""
        return [int(c) for c in np.nonzero(self.mask(np.array([row]), self._constrained(row))[0])[0]]

    def _constrained(self, row: int) -> list[tuple[int, list[int]]]:
        allowed = self.allowed_idx[row]
        return [] if allowed is None else [(0, allowed)]

    def exact_loads(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The full load vector after each (bundle row, target col) move: K × N."""
        src, src_cpu, src_mem = self.moved_source(rows)
        out = np.repeat(self.loads[None, :], rows.size, axis=0)
        k = np.arange(rows.size)
        out[k, src] = load(src_cpu, self.maxcpu[src], src_mem, self.maxmem[src])
        tc = self.cpu[cols] + self.bcpu[rows]
        tm = self.mem[cols] + self.bmem[rows]
        out[k, cols] = load(tc, self.maxcpu[cols], tm, self.maxmem[cols])
        return out


def exact_imbalances(loads: np.ndarray, scale: str) -> np.ndarray:
    """`imbalance.imbalance` for each row of a K × N matrix, folding columns left to right
    so each row's bits equal the scalar computation."""
    k, n = loads.shape
    total = np.zeros(k)
    for j in range(n):
        total += loads[:, j]
    if n < 2:
        return np.zeros(k)
    mean = total / n
    squared = np.zeros(k)
    for j in range(n):
        d = loads[:, j] - mean
        squared += d * d
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = np.where(total != 0.0, np.sqrt(squared / n) / mean, 0.0)
    return cv / np.sqrt(n - 1) if scale == "normalized" else cv


def squared_scores(cluster: Cluster) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(bundle rows, rows × nodes CV² after each move; inf where not allowed), chunk by chunk."""
    evaluator = MoveEvaluator(cluster.loads)
    for part, constrained in cluster.chunks():
        yield part, _chunk_scores(cluster, evaluator, part, constrained)


def _chunk_scores(
    cluster: Cluster, evaluator: MoveEvaluator, part: np.ndarray, constrained: list[tuple[int, list[int]]]
) -> np.ndarray:
    # What each bundle adds to each node's load: `load` of the bundle alone, written with
    # reciprocals so the bundles × nodes matrix costs two multiplications, not divisions.
    half_inv_cpu, half_inv_mem = 0.5 / cluster.maxcpu, 0.5 / cluster.maxmem
    src, src_cpu, src_mem = cluster.moved_source(part)
    src_load = load(src_cpu, cluster.maxcpu[src], src_mem, cluster.maxmem[src])
    delta = np.multiply.outer(cluster.bcpu[part], half_inv_cpu)
    delta += np.multiply.outer(cluster.bmem[part], half_inv_mem)
    score = evaluator.squared_after(src, src_load, delta)
    score[np.arange(src.size), src] = np.inf
    for r, allowed in constrained:
        keep = score[r, allowed]
        score[r] = np.inf
        score[r, allowed] = keep
    if cluster.refused is not None:
        score[cluster.refused[part]] = np.inf
    return score


def move_floors(cluster: Cluster, evaluator: MoveEvaluator) -> np.ndarray:
    """Per bundle row, a floor under the CV² of its every move (`MoveEvaluator.lower_bound`):
    what a bundle adds to a target lies between its load on the largest and on the smallest
    node, and never below zero (the snapshot refuses negative demand)."""
    half_inv_cpu, half_inv_mem = 0.5 / cluster.maxcpu, 0.5 / cluster.maxmem
    src, src_cpu, src_mem = cluster.moved_source(slice(None))
    src_load = load(src_cpu, cluster.maxcpu[src], src_mem, cluster.maxmem[src])
    low = cluster.bcpu * half_inv_cpu.min() + cluster.bmem * half_inv_mem.min()
    high = cluster.bcpu * half_inv_cpu.max() + cluster.bmem * half_inv_mem.max()
    return evaluator.lower_bound(src, src_load, low, high)


def best_bruteforce(cluster: Cluster) -> Scored | None:
    """The move with the lowest imbalance after it; ties by (leader, source, target).

    Bundles are scored in the order of their floor (`move_floors`), and the search stops
    at the first chunk whose lowest floor lies beyond the best found plus the re-check's
    tolerance (with room for the floor's own rounding): no move of the rows left could be
    re-checked, so the pick is the one a full scan makes, and a round usually scores a
    few thousand bundles instead of all of them."""
    near_rows: list[np.ndarray] = []
    near_cols: list[np.ndarray] = []
    best = np.inf
    evaluator = MoveEvaluator(cluster.loads)
    floors = move_floors(cluster, evaluator)
    for part, constrained in cluster.chunks(np.argsort(floors, kind="stable")):
        if floors[part[0]] * (1.0 - FLOOR_ROUNDING) > best + _tolerance(best):
            break
        score = _chunk_scores(cluster, evaluator, part, constrained)
        chunk_best = float(score.min())
        if chunk_best > best + _tolerance(best):
            continue
        best = min(best, chunk_best)
        r, c = np.nonzero(score <= best + _tolerance(best))
        near_rows.append(part[r])
        near_cols.append(c)
    if not np.isfinite(best):
        return None
    rows, cols = np.concatenate(near_rows), np.concatenate(near_cols)
    exact = np.array([truncated(float(v)) for v in _exact_in_chunks(cluster, rows, cols)])
    order = np.lexsort((cols, rows, exact))  # rows are in leader order, cols in target-name order
    pick = order[0]
    return Scored(cluster.bundles[rows[pick]], cluster.names[cols[pick]], float(exact[pick]))


def scored(cluster: Cluster, row: int, col: int) -> Scored:
    """Bundle `row` to node `col`, with its exact imbalance after."""
    after = exact_imbalances(cluster.exact_loads(np.array([row]), np.array([col])), cluster.scale)
    return Scored(cluster.bundles[row], cluster.names[col], truncated(float(after[0])))


def top_moves(cluster: Cluster, count: int) -> list[tuple[int, int, float]]:
    """The `count` moves with the lowest CV² after them (approximate): (row, col, CV²), best first."""
    found: list[tuple[float, int, int]] = []
    for part, score in squared_scores(cluster):
        flat = score.ravel()
        take = min(count, flat.size)
        for i in np.argpartition(flat, take - 1)[:take] if take else ():
            if np.isfinite(flat[i]):
                r, c = divmod(int(i), score.shape[1])
                found.append((float(flat[i]), int(part[r]), c))
    found.sort()
    return [(r, c, v) for v, r, c in found[:count]]


def lowest_squared(cluster: Cluster) -> float:
    """The lowest CV² any single move reaches (approximate); inf if nothing may move."""
    return min((float(score.min()) for _, score in squared_scores(cluster) if score.size), default=np.inf)


def _tolerance(best: float) -> float:
    """Room for the O(1) formula's rounding (on the squared imbalance): anything this
    close to the best is re-checked exactly."""
    return 1e-9 + 1e-6 * best if np.isfinite(best) else np.inf


def _exact_in_chunks(cluster: Cluster, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    step = max(1, CHUNK_CELLS // max(len(cluster.names), 1))
    parts = [
        exact_imbalances(cluster.exact_loads(rows[i : i + step], cols[i : i + step]), cluster.scale)
        for i in range(0, rows.size, step)
    ]
    return np.concatenate(parts) if parts else np.zeros(0)


def best_topsis(cluster: Cluster) -> Scored | None:
    """The move whose resulting cluster is closest to the ideal on Proxmox's four placement
    criteria (weights 1/2/5/10); ties keep candidate order. Reports its exact imbalance."""
    if cluster.candidate_count() * len(cluster.names) > EXACT_TOPSIS_CELLS:
        found = _best_topsis_grid(cluster)
        return None if found is None else scored(cluster, *found)
    pick = topsis.best(lambda: (criteria for _, _, criteria in _topsis_criteria(cluster, True)), WEIGHTS)
    if pick is None:
        return None
    for part, constrained in cluster.chunks():
        r, c = np.nonzero(cluster.mask(part, constrained))
        if pick < r.size:
            return scored(cluster, int(part[r[pick]]), int(c[pick]))
        pick -= r.size
    raise AssertionError("topsis picked a candidate beyond the candidate list")


def _best_topsis_grid(cluster: Cluster) -> tuple[int, int] | None:
    """`topsis.best` over the grid criteria, with a second pass that skips the bundles that
    cannot win: all four criteria are minimized, so closeness at floors under a bundle's
    criteria (`_criteria_floors`) is a ceiling over its every move. Bundles are scored in
    falling ceiling order until the next ceiling is below the best closeness found; among
    equal best closeness the first candidate wins (the lowest bundle row, then target), as in
    the full scan."""
    ideals = topsis.ideals((criteria for _, _, criteria in _topsis_criteria(cluster, False)), WEIGHTS)
    if ideals is None:
        return None
    weights = topsis.normalized_weights(WEIGHTS)
    ceilings = topsis.closeness(np.maximum(_criteria_floors(cluster), ideals.low), ideals, weights)
    order = np.argsort(-ceilings, kind="stable")
    best, found = -np.inf, (len(cluster.bundles), 0)
    for part, mask, criteria in _topsis_criteria(cluster, False, order):
        if ceilings[part[0]] + CEILING_ROUNDING < best:
            break
        if criteria.shape[0] == 0:
            continue
        score = topsis.closeness(criteria, ideals, weights)
        top = float(score.max())
        if top < best:
            continue
        r, c = np.nonzero(mask)
        ties = np.flatnonzero(score == top)
        first = min(zip(part[r[ties]].tolist(), c[ties].tolist()))
        best, found = top, first if top > best else min(found, first)
    return found


def _criteria_floors(cluster: Cluster) -> np.ndarray:
    """Per bundle row, floors under the four criteria of its every move (bundles × 4). The
    sum of squares is at least the general form's with the target unchanged, as a target only
    gains (demand is never negative; the margin covers rounding); the highest utilisation is
    at least the source's and that of the nodes outside the top two the move leaves alone
    (a top node as target keeps at least its own value)."""
    src, src_cpu, src_mem = cluster.moved_source(slice(None))
    out = np.empty((src.size, 4))
    for k, used, capacity, src_used in (
        (0, cluster.cpu, cluster.maxcpu, src_cpu),
        (2, cluster.mem, cluster.maxmem, src_mem),
    ):
        base = used / capacity
        src_util = src_used / capacity[src]
        total = float(np.dot(base, base))
        squares = total - base[src] ** 2 + src_util**2 - FLOOR_ROUNDING * (total + 1.0)
        out[:, k] = 1.0 + np.sqrt(np.maximum(squares, 0.0) / base.size)
        out[:, k + 1] = 1.0 + np.maximum(_untouched_highest(top_three(base), src), src_util)
    return out


def _topsis_criteria(
    cluster: Cluster, exact: bool, order: np.ndarray | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(bundle rows, allowed cells, K × 4 criteria of the candidates) chunk by chunk, in
    candidate order (row-major over each chunk's allowed cells; `order` as in `chunks`).
    Past EXACT_TOPSIS_CELLS the O(1) criteria are computed on
    the chunk's bundles × nodes grid by broadcasting (each cell the same operations as for a
    single candidate, so the same bits) and the allowed cells taken out, instead of on
    per-candidate index arrays gathered 20 M long."""
    for part, constrained in cluster.chunks(order, TOPSIS_CHUNK_CELLS):
        mask = cluster.mask(part, constrained)
        criteria = np.empty((int(mask.sum()), 4), order="F")  # column-major: TOPSIS works per criterion
        if exact:
            r, c = np.nonzero(mask)
            src, src_cpu, src_mem = cluster.moved_source(part[r])
            moving_cpu, moving_mem = cluster.bcpu[part[r]], cluster.bmem[part[r]]
            tgt: np.ndarray = c
        else:
            src, src_cpu, src_mem = cluster.moved_source(part)
            src, src_cpu, src_mem = src[:, None], src_cpu[:, None], src_mem[:, None]
            moving_cpu, moving_mem = cluster.bcpu[part][:, None], cluster.bmem[part][:, None]
            tgt = np.arange(len(cluster.names))[None, :]
        for k, used, capacity, src_used, moving in (
            (0, cluster.cpu, cluster.maxcpu, src_cpu, moving_cpu),
            (2, cluster.mem, cluster.maxmem, src_mem, moving_mem),
        ):
            tgt_util = (used[tgt] + moving) / capacity[tgt]
            src_util = src_used / capacity[src]
            if exact:
                criteria[:, k], criteria[:, k + 1] = _folded_criteria(used / capacity, src, src_util, tgt, tgt_util)
            else:
                average, highest = grid_criteria(used / capacity, src[:, 0], src_util[:, 0], tgt_util)
                criteria[:, k], criteria[:, k + 1] = average[mask], highest[mask]
        yield part, mask, criteria


def grid_criteria(
    base: np.ndarray, src: np.ndarray, src_util: np.ndarray, tgt_util: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`placement.criteria_incremental` on a bundles × nodes grid of moves (row r leaves node
    src[r], now at src_util[r]; column t is the target, at tgt_util[r, t]), with the same bits
    at every cell where the target is not the source (the cells a move can take). The general
    form spends ~25 full-grid operations per resource on the source-equals-target case and on
    the top-three test per cell; here the terms that depend on the row alone or on the column
    alone are computed once per row or column, leaving a handful of grid operations, which is
    half of TOPSIS's time at 1000 nodes × 20 000 guests. The sum of squares keeps the general
    form's order, ((Σ − src²) − tgt²) + src_util² + tgt_util²; a maximum is exact in any order.
    The cell of a row's own node holds no meaningful value (callers mask it out)."""
    squares = (float(np.dot(base, base)) - base[src] ** 2)[:, None] - base**2
    squares += (src_util**2)[:, None]
    squares += tgt_util**2
    np.maximum(squares, 0.0, out=squares)
    squares /= base.size
    np.sqrt(squares, out=squares)
    squares += 1.0
    top = top_three(base)
    high = np.maximum(np.maximum(_untouched_highest(top, src), src_util)[:, None], tgt_util)
    for col in {int(c) for c in top[0][:2] if c >= 0}:  # a target among the top two frees its own value
        high[:, col] = np.maximum(np.maximum(_untouched_highest(top, src, col), src_util), tgt_util[:, col])
    high += 1.0
    return squares, high


def _untouched_highest(top_three: tuple[np.ndarray, np.ndarray], src: np.ndarray, tgt: int = -1) -> np.ndarray:
    """Per move off node src[r] to node `tgt` (by default any node outside the top two; with
    fewer than two nodes there is no move), the highest utilisation of the nodes the move
    leaves alone."""
    top, values = top_three
    first_out = (src == top[0]) | (tgt == top[0])
    second_out = (src == top[1]) | (tgt == top[1])
    kept: np.ndarray = np.where(first_out, np.where(second_out, values[2], values[1]), values[0])
    return kept


def _folded_criteria(
    base: np.ndarray, src: np.ndarray, src_util: np.ndarray, tgt: np.ndarray, tgt_util: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`placement.criteria_after`, in slices that keep its K × N work matrix bounded."""
    step = max(1, CHUNK_CELLS // base.size)
    parts = [
        criteria_after(base, src[i : i + step], src_util[i : i + step], tgt[i : i + step], tgt_util[i : i + step])
        for i in range(0, max(src.size, 1), step)
    ]  # one empty slice for no candidates
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
