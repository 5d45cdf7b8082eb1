import math

import numpy as np
import pytest
from engine_clusters import pve_crate_cluster

from crs.imbalance import MoveEvaluator, imbalance, relative_gain, truncated
from crs.moves import exact_imbalances
from crs.usage import node_loads


@pytest.mark.parametrize(
    ("loads", "raw", "normalized"),
    [((1, 0, 0), math.sqrt(2), 1.0), ((1, 1, 0), 0.7071067811865476, 0.5), ((0.6, 0.3, 0.3), 0.3535533905932738, 0.25)],
)
def test_reference_table_values(loads, raw, normalized):
    # reference/proxmox-crs.md §4.3
    assert imbalance(loads, "raw") == pytest.approx(raw, abs=1e-15)
    assert imbalance(loads, "normalized") == pytest.approx(normalized, abs=1e-15)


def test_imbalance_matches_proxmox_on_its_homogeneous_cluster():
    # proxmox-resource-scheduling tests/scheduler.rs: raw 0.4893954724628247 (2.0), normalized (2.1)
    loads = list(node_loads(pve_crate_cluster(), "dynamic").values())
    assert abs(imbalance(loads, "raw") - 0.4893954724628247) <= 2.3e-16
    assert abs(imbalance(loads, "normalized") - 0.3460548572604576) <= 2.3e-16


def test_imbalance_matches_proxmox_on_its_heterogeneous_cluster():
    loads = list(node_loads(pve_crate_cluster(heterogeneous=True), "dynamic").values())
    assert abs(imbalance(loads, "raw") - 0.33026013056867354) <= 2.3e-16
    assert abs(imbalance(loads, "normalized") - 0.23352917788066363) <= 2.3e-16


BALANCED = (1.7 / 16 + 224395264 / 68719476736) / 2  # the crate's perfectly balanced node


@pytest.mark.parametrize("loads", [(), (0.7,), (0.0, 0.0, 0.0), (BALANCED,) * 3])
def test_nothing_to_balance_is_zero(loads):
    assert imbalance(loads) == 0.0


def test_normalized_scale_reaches_one_when_one_node_carries_everything():
    for n in (2, 3, 10, 45):
        assert imbalance([1.0] + [0.0] * (n - 1)) == pytest.approx(1.0)


def test_batch_fold_equals_scalar_bit_for_bit():
    rng = np.random.default_rng(1)
    loads = rng.uniform(0, 2, size=(50, 17))
    for scale in ("raw", "normalized"):
        batch = exact_imbalances(loads, scale)
        assert [float(v) for v in batch] == [imbalance(list(row), scale) for row in loads]


def test_o1_evaluator_is_within_float_noise_of_exact():
    rng = np.random.default_rng(2)
    loads = rng.uniform(0, 1.5, size=40)
    src = np.array([3, 3, 7])
    src_load = np.array([0.1, 0.2, 0.0])
    delta = rng.uniform(0, 0.3, size=(3, 40))
    approx = np.sqrt(MoveEvaluator(loads).squared_after(src, src_load, delta.copy()) / (loads.size - 1))
    for r in range(3):
        for t in range(40):
            if t == src[r]:
                continue
            moved = loads.copy()
            moved[src[r]] = src_load[r]
            moved[t] += delta[r, t]
            assert approx[r, t] == pytest.approx(imbalance(list(moved)), abs=1e-12)


def test_truncation_keeps_fifteen_decimals_so_noise_cannot_split_a_tie():
    # the values of proxmox-resource-scheduling's test_scored_migration_order
    assert truncated(0.7231749488916931) == truncated(0.723174948891693)
    assert truncated(0.723174948891693 + 1e-15) > truncated(0.723174948891693)


def test_relative_gain_is_a_fraction_of_the_current_imbalance():
    assert relative_gain(0.5, 0.4) == pytest.approx(0.2)
    assert relative_gain(0.0, 0.0) == 0.0
    assert relative_gain(0.4, 0.5) < 0
