"""The bruteforce search skips bundles whose floor (`moves.move_floors`) lies beyond the best
move found: the floor must never exceed a real move's score, and the pick must stay the
one a scan of every candidate makes."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from bench.make_snapshot import synthetic
from crs import moves
from crs.bundles import movable_bundles
from crs.imbalance import MoveEvaluator, truncated
from crs.moves import Cluster, best_bruteforce, exact_imbalances, move_floors, squared_scores
from crs.rules import compile_rules
from crs.snapshot import parse
from crs.usage import node_stats


def cluster_of(doc: dict) -> Cluster:
    snap = parse(doc)
    mode = snap.settings.mode
    bundles = movable_bundles(snap, compile_rules(snap), mode)
    return Cluster(node_stats(snap, mode), bundles, snap.settings.imbalance_scale)


def every_candidate_exactly(cluster: Cluster) -> tuple[str, str, str, float]:
    """Proxmox's way: each allowed move's exact imbalance; the lowest, ties by (leader, source, target)."""
    rows, cols = np.nonzero(np.vstack([cluster.mask(part, c) for part, c in cluster.chunks()]))
    after = exact_imbalances(cluster.exact_loads(rows, cols), cluster.scale)
    key = min(
        (truncated(float(a)), cluster.bundles[r].leader, cluster.bundles[r].node, cluster.names[c])
        for r, c, a in zip(rows, cols, after)
    )
    return key[1], key[2], key[3], key[0]


@hsettings(max_examples=60, deadline=None)
@given(
    nodes=st.integers(2, 12),
    guests=st.integers(1, 60),
    seed=st.integers(0, 10_000),
    mode=st.sampled_from(["static", "dynamic", "basic"]),
)
def test_no_move_scores_below_its_bundles_floor(nodes, guests, seed, mode):
    cluster = cluster_of(synthetic(nodes, guests, mode, seed=seed))
    assert cluster.bundles  # every synthetic guest is started and movable
    evaluator = MoveEvaluator(cluster.loads)
    floors = move_floors(cluster, evaluator)
    for part, score in squared_scores(cluster):
        lowest = np.where(np.isfinite(score), score, np.inf).min(axis=1)
        assert (floors[part] <= lowest * (1.0 + 1e-12) + 1e-15).all()


@pytest.mark.parametrize("seed", range(8))
def test_skipping_bundles_below_the_best_keeps_the_full_scans_pick(monkeypatch, seed):
    # 40 nodes, 600 guests, 15 bundles per chunk: the search stops after a few of 40 chunks
    cluster = cluster_of(synthetic(40, 600, "dynamic", seed=seed))
    monkeypatch.setattr(moves, "CHUNK_CELLS", 600)
    scored_rows: list[int] = []
    real_scores = moves._chunk_scores

    def counting(cluster, evaluator, part, constrained):
        scored_rows.extend(part.tolist())
        return real_scores(cluster, evaluator, part, constrained)

    monkeypatch.setattr(moves, "_chunk_scores", counting)
    pick = best_bruteforce(cluster)
    assert pick is not None
    assert (pick.bundle.leader, pick.bundle.node, pick.target, pick.imbalance_after) == every_candidate_exactly(cluster)
    assert len(scored_rows) < len(cluster.bundles) / 2  # the floors did skip most bundles
