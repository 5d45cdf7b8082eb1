"""crs.paid: a done move is graded on the loads measured after it, against the same loads with
the guest counted on its source; never on its own prediction."""

import pytest

from crs.paid import Measured, judge, share
from crs.usage import NodeStats

GIB = 2**30


def node(name, cores_used, mem_gib, cpus=16, mem_total_gib=64):
    return NodeStats(name, cores_used, cpus, mem_gib * GIB, mem_total_gib * GIB)


def after(a, b, cpu=4.0, mem_gib=8):
    """One measurement after vm moved a → b (4 cores, 8 GiB), nodes a and b as measured."""
    return Measured((node("a", *a), node("b", *b)), "b", cpu, mem_gib * GIB)


def test_a_balancing_move_that_evened_the_loads_paid():
    # measured: even; with the guest on a: 12 vs 4 cores, 40 vs 24 GiB
    verdict = judge("even", "a", [after((8, 32), (8, 32)), after((7, 30), (9, 34))])
    assert verdict is not None and verdict.paid
    assert verdict.samples == 2 and verdict.imbalance < verdict.imbalance_unmoved


def test_a_balancing_move_undone_by_the_loads_after_it_did_not_pay():
    # the source emptied out on its own after the move: the guest would have evened it there
    verdict = judge("even", "a", [after((2, 10), (14, 50)), after((3, 12), (13, 48))])
    assert verdict is not None and not verdict.paid
    assert verdict.imbalance > verdict.imbalance_unmoved


def test_a_pressure_move_paid_while_its_source_would_have_stalled():
    # a runs 16 cores' demand on 16 threads; with the guest's 4 more its guests would wait 20 %
    relieved = judge("pressure", "a", [after((16, 32), (6, 20))] * 3)
    assert relieved is not None and relieved.paid
    assert (relieved.stalled, relieved.stalled_unmoved) == (0.0, 1.0)
    # the stall ended on its own: with the guest back, a would not have stalled either
    passed = judge("pressure", "a", [after((10, 32), (6, 20))] * 3)
    assert passed is not None and not passed.paid
    assert passed.stalled_unmoved == 0.0
    # it moved the stall to its target instead
    moved = judge("pressure", "a", [after((16, 32), (20, 20))] * 3)
    assert moved is not None and not moved.paid and moved.stalled == 1.0


def test_nothing_to_judge_on_without_a_measurement_of_the_source():
    gone = Measured((node("b", 8, 32), node("c", 8, 32)), "b", 4.0, 8 * GIB)  # a is in maintenance
    assert judge("even", "a", [gone]) is None
    assert judge("even", "a", []) is None


def test_share_counts_only_the_judged():
    assert share([True, False, None, True]) == pytest.approx(2 / 3)
    assert share([None]) is None
