import math

import numpy as np
import pytest
from engine_clusters import GIB, pve_crate_cluster

from crs import topsis
from crs.errors import CrsError
from crs.placement import WEIGHTS, score_nodes


def test_minimized_criteria_prefer_the_smaller_values():
    matrix = np.array([[1.0, 1.0], [2.0, 2.0], [1.5, 1.5]])
    assert list(topsis.rank(matrix, (-1.0, -1.0))) == [0, 2, 1]
    assert list(topsis.rank(matrix, (1.0, 1.0))) == [1, 2, 0]


def test_weights_enter_squared_so_the_heavy_criterion_dominates():
    # alt 0 is better on the weight-1 criterion, alt 1 on the weight-3 one
    matrix = np.array([[1.0, 2.0], [2.0, 1.0]])
    assert list(topsis.rank(matrix, (-1.0, -3.0))) == [1, 0]


def test_equal_alternatives_score_zero_and_keep_input_order():
    matrix = np.array([[1.0, 2.0]] * 3)
    assert list(topsis.scores(matrix, (-1.0, -2.0))) == [0.0, 0.0, 0.0]
    assert list(topsis.rank(matrix, (-1.0, -2.0))) == [0, 1, 2]


def test_single_alternative_scores_zero():
    assert list(topsis.scores(np.array([[3.0, 4.0]]), (-1.0, 1.0))) == [0.0]


def test_zero_weights_are_refused():
    with pytest.raises(CrsError, match="weights"):
        topsis.scores(np.array([[1.0]]), (0.0,))


def test_chunked_best_equals_ranking_of_the_whole_matrix():
    rng = np.random.default_rng(3)
    matrix = rng.uniform(1, 2, size=(1000, 4))
    chunks = lambda: (matrix[i : i + 77] for i in range(0, 1000, 77))  # noqa: E731
    assert topsis.best(chunks, WEIGHTS) == int(topsis.rank(matrix, WEIGHTS)[0])


def _proxmox_topsis(rows, raw_weights):
    """Proxmox's TOPSIS written plainly, one float at a time: weights |w| / Σ|w| (negative =
    minimize); each column divided by its L2 norm unless that is 0; ideal and anti-ideal per
    column; each distance the left fold of ((x − ideal) · w)², then its root; closeness
    D⁻/(D⁺+D⁻), 0 when both are 0. Every sum folds left to right, as Rust's `fold` does."""
    total = 0.0
    for w in raw_weights:
        total += abs(w)
    weights = [abs(w) / total for w in raw_weights]
    matrix = [list(row) for row in rows]
    best, worst = [], []
    for j, raw in enumerate(raw_weights):
        squares = 0.0
        for row in matrix:
            squares += row[j] * row[j]
        norm = math.sqrt(squares)
        for row in matrix:
            row[j] = row[j] / norm if norm != 0.0 else row[j]
        column = [row[j] for row in matrix]
        best.append(min(column) if raw < 0 else max(column))
        worst.append(max(column) if raw < 0 else min(column))
    out = []
    for row in matrix:
        to_best = to_worst = 0.0
        for x, b, w, weight in zip(row, best, worst, weights, strict=True):
            away_from_best, away_from_worst = (x - b) * weight, (x - w) * weight
            to_best += away_from_best * away_from_best  # x * x: `** 2` calls pow(), which may round otherwise
            to_worst += away_from_worst * away_from_worst
        to_best, to_worst = math.sqrt(to_best), math.sqrt(to_worst)
        out.append(0.0 if to_worst + to_best == 0.0 else to_worst / (to_worst + to_best))
    return out


def _random_matrix(rng, rows, width):
    """Values from a few levels (ties between alternatives), with an equal (constant) column,
    an all-zero column or a duplicated column now and then."""
    levels = rng.random() < 0.5
    matrix = rng.choice([0.25, 0.5, 1.0, 1.5, 3.0], (rows, width)) if levels else rng.random((rows, width)) * 3
    kind = rng.integers(0, 4)
    j = int(rng.integers(0, width))
    if kind == 1:
        matrix[:, j] = matrix[0, j]
    elif kind == 2:
        matrix[:, j] = 0.0
    elif kind == 3 and width > 1:
        matrix[:, j] = matrix[:, (j + 1) % width]
    return matrix


@pytest.mark.parametrize("seed", range(40))
def test_scores_are_those_of_proxmox_topsis_written_plainly(seed):
    """`scores`, the chunked `best`, and `scores_columns` (many decisions side by side) give
    the plain computation's bits, so every tie between alternatives splits the same way."""
    rng = np.random.default_rng(seed)
    width = int(rng.integers(1, 6))
    weights = tuple(float(w) for w in rng.choice([-10.0, -5.0, -2.0, -1.0, 0.5, 3.0], width))
    matrix = _random_matrix(rng, int(rng.integers(1, 60)), width)
    want = _proxmox_topsis(matrix.tolist(), weights)
    assert topsis.scores(matrix, weights).tolist() == want
    step = int(rng.integers(1, 9))
    chunks = lambda: (matrix[i : i + step] for i in range(0, matrix.shape[0], step))  # noqa: E731
    assert topsis.best(chunks, weights) == want.index(max(want))
    decisions = [_random_matrix(rng, matrix.shape[0], width) for _ in range(int(rng.integers(2, 6)))]
    together = topsis.scores_columns([np.column_stack([d[:, j] for d in decisions]) for j in range(width)], weights)
    for d, decision in enumerate(decisions):
        assert together[:, d].tolist() == _proxmox_topsis(decision.tolist(), weights)


def _ranking(snap, sid):
    scores = score_nodes(snap, sid)
    return sorted(scores, key=lambda n: (scores[n], n))


START = {  # proxmox-resource-scheduling tests/scheduler.rs start-node rankings
    "memory-heavy": ((1, 12 * GIB), ["node2", "node3", "node1"], ["node2", "node1", "node3"]),
    "cpu-heavy": ((12, 0), ["node1", "node3", "node2"], ["node3", "node2", "node1"]),
    "unlimited-cpu": ((0, 0), ["node1", "node3", "node2"], ["node1", "node3", "node2"]),
    "combined": ((12, 12 * GIB), ["node2", "node3", "node1"], ["node2", "node1", "node3"]),
}


@pytest.mark.parametrize("case", START)
@pytest.mark.parametrize("heterogeneous", [False, True])
def test_start_node_ranking_matches_proxmox(case, heterogeneous):
    (cores, memory), homogeneous_order, heterogeneous_order = START[case]
    guest = {"sid": "vm:200", "node": "node1", "state": "stopped", "cores": cores, "memory_bytes": memory}
    snap = pve_crate_cluster(heterogeneous, guests=[guest])
    assert _ranking(snap, "vm:200") == (heterogeneous_order if heterogeneous else homogeneous_order)


def test_topsis_at_scale_picks_the_same_move_as_the_exact_fold(monkeypatch):
    from bench.make_snapshot import synthetic
    from crs import moves
    from crs.balancer import plan
    from crs.snapshot import parse

    snap = parse(synthetic(30, 400, "dynamic", "topsis"))
    exact = plan(snap).move
    monkeypatch.setattr(moves, "EXACT_TOPSIS_CELLS", 0)  # force the O(1) criteria
    monkeypatch.setattr(moves, "TOPSIS_CHUNK_CELLS", 1000)  # and many small chunks
    assert plan(snap).move == exact


@pytest.mark.parametrize("nodes", [2, 3, 4, 9, 40])
def test_grid_criteria_equal_the_general_form_bit_for_bit_on_every_move(nodes):
    """The bundles × nodes shortcut of large TOPSIS rounds gives every move (target not the
    source) exactly the bits of `criteria_incremental`, so the picked move cannot change;
    ties between nodes at the top of the utilisation included."""
    from crs.moves import grid_criteria
    from crs.placement import criteria_incremental

    rng = np.random.default_rng(nodes)
    for _ in range(20):
        base = rng.choice([0.1, 0.5, 0.9], nodes) if rng.random() < 0.3 else rng.random(nodes) * 1.5
        rows = 50
        src = rng.integers(0, nodes, rows)
        src_util = base[src] * rng.random(rows)
        tgt_util = base[None, :] + rng.random((rows, nodes)) * 0.3
        average, high = grid_criteria(base, src, src_util, tgt_util)
        tgt = np.arange(nodes)[None, :]
        want_average, want_high = criteria_incremental(base, src[:, None], src_util[:, None], tgt, tgt_util)
        moves = src[:, None] != tgt
        assert np.array_equal(average[moves], want_average[moves])
        assert np.array_equal(high[moves], want_high[moves])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_skipping_bundles_that_cannot_win_picks_what_the_full_scan_picks(monkeypatch, seed, mode):
    """Large TOPSIS rounds score only the bundles whose closeness ceiling reaches the best
    found; with no ceiling (every bundle scored) the pick is the same move, first of equals
    included (the synthetic guests come in four sizes, so equal candidates abound)."""
    from bench.make_snapshot import synthetic
    from crs import moves
    from crs.balancer import plan
    from crs.snapshot import parse

    snap = parse(synthetic(8 + 7 * seed, 60 + 40 * seed, mode, "topsis", seed=seed))
    monkeypatch.setattr(moves, "EXACT_TOPSIS_CELLS", 0)  # the grid path, where bundles are skipped
    monkeypatch.setattr(moves, "TOPSIS_CHUNK_CELLS", 64)  # many small chunks, so whole chunks are skipped
    pruned = plan(snap).move
    monkeypatch.setattr(moves, "_criteria_floors", lambda cluster: np.zeros((len(cluster.bundles), 4)))
    assert pruned is not None
    assert plan(snap).move == pruned
