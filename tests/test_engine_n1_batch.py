"""The batch N+1 verdict (crs.n1_batch) against `crs.n1.survives`, the one N+1 function, on
random clusters: the same verdict for the cluster and for every single loss, with extra guests
placed as capacity places them, on the exact fold and past its budget."""

import random
from dataclasses import replace

import pytest
from engine_clusters import GIB, node, snapshot, vm

import crs.n1
from crs.fits import Limits
from crs.model import Guest
from crs.n1 import Cluster, loss_survived, survives
from crs.n1_batch import Extras, accepts, first_failure, prepare, survived_with, verdict


def random_cluster(rng, nodes, roomy=False):
    """Static mode, whole sizes; moving, stopped, disabled, unrecoverable, pinned and rule-bound
    guests among plain ones; nodes sized so that some losses are survived and some are not
    (`roomy`: most survived, with room left for capacity to fill)."""
    names = [f"node{i:02d}" for i in range(nodes)]
    guests = []
    for i in range(nodes * rng.randint(3, 8)):
        home = rng.choice(names)
        state = rng.choice(["started"] * 30 + ["stopped", "migrate", "disabled", "request_stop"])
        extra = {"state": state, "recoverable": roomy or rng.random() > 0.005, "ha": rng.random() > 0.1}
        if state == "migrate":
            extra["target"] = rng.choice([n for n in names if n != home])
        if rng.random() < 0.03:
            extra["allowed_nodes"] = sorted(rng.sample(names, 2))
        guests.append(
            vm(
                f"vm:{100 + i}",
                home,
                cores=rng.choice([1, 2, 4, 8] * 5 + [0]),
                memory_bytes=rng.choice([1, 2, 4, 8, 16]) * GIB,
                **extra,
            )
        )
    rules = []
    if rng.random() < 0.3:
        rules.append(
            {"id": "apart", "type": "resource-affinity", "resources": ["vm:100", "vm:101"], "affinity": "negative"}
        )
    if rng.random() < 0.3:
        rules.append(
            {"id": "pin", "type": "node-affinity", "resources": ["vm:102"], "nodes": names[:2], "strict": True}
        )
    node_list = [
        node(
            n,
            cpus=rng.choice([8, 16, 32]),
            memory_bytes=rng.choice([96, 128, 192] if roomy else [48, 64, 96, 128]) * GIB,
        )
        for n in names
    ]
    return snapshot(node_list, guests, rules, mode="static")


def extra_guests(rng, snap, prepared):
    """New guests as capacity imagines them (crs.capacity._probe): sids above any real VMID."""
    usable = [n.name for n in snap.nodes if n.usable]
    size = rng.choice([(1, 2), (2, 4), (4, 8)])
    guests = [
        Guest(f"vm:{10**9 + k}", rng.choice(usable), cores=size[0], memory_bytes=size[1] * GIB)
        for k in range(rng.randint(0, 2 * len(usable)))
    ]
    assert all(accepts(prepared, g) for g in guests)
    return guests


CASES = [(seed, exact) for seed in range(60) for exact in (True, False)]


@pytest.mark.parametrize(("seed", "exact"), CASES, ids=[f"{s}-{'exact' if e else 'o1'}" for s, e in CASES])
def test_batch_verdict_equals_survives_for_the_cluster_and_every_loss(seed, exact, monkeypatch):
    if not exact:
        monkeypatch.setattr(crs.n1, "EXACT_TOPSIS_CELLS", 0)  # both paths score in O(1)
    rng = random.Random(seed)
    snap = random_cluster(rng, nodes=rng.randint(3, 9))
    limits = Limits(memory_reserve_bytes=rng.choice([0, 2 * GIB]), cpu_overcommit=rng.choice([2.0, 4.0]))
    prepared = prepare(snap, limits)
    assert prepared is not None
    extra = extra_guests(rng, snap, prepared)
    grown = replace(snap, guests=snap.guests + tuple(extra))
    cluster = Cluster.of(grown)
    extras = Extras.of(prepared, extra)
    for name in prepared.names:
        assert survived_with(prepared, extras, name, [len(extra)]) == [loss_survived(grown, name, cluster, limits)]
    failed = first_failure(prepared, extras, len(extra))
    assert (failed is None) == survives(grown, limits)
    if failed is not None:
        assert not loss_survived(grown, failed, cluster, limits)


@pytest.mark.parametrize("seed", range(30))
def test_the_stored_verdict_says_per_loss_what_the_full_report_says(seed):
    """What the dashboard stores (`verdict`, the batch deciding which losses survive) against
    `crs.n1.n1`: the same verdict and, per lost node, the same overloads, lost and down guests
    and count of recovered ones; in dynamic mode (no batch) too."""
    rng = random.Random(seed)
    snap = random_cluster(rng, nodes=rng.randint(3, 9))
    if seed % 3 == 0:
        snap = replace(snap, settings=replace(snap.settings, mode="dynamic"))
    limits = Limits(memory_reserve_bytes=rng.choice([0, 2 * GIB]), cpu_overcommit=rng.choice([2.0, 4.0]))
    full, kept = crs.n1.n1(snap, limits), verdict(snap, limits)
    assert (kept.survives, kept.verdict) == (full.survives, full.verdict)
    for loss, short in zip(full.losses, kept.losses, strict=True):
        assert (short.node, short.overloaded, short.lost) == (loss.node, loss.overloaded, loss.lost)
        assert short.down == loss.down
        assert (short.recovered, short.summary()) == (len([r for r in loss.recoveries if r.target]), loss.summary())


def test_outside_the_batch_the_caller_is_told_to_use_survives():
    rng = random.Random(1)
    snap = random_cluster(rng, nodes=4)
    assert prepare(replace(snap, settings=replace(snap.settings, mode="dynamic"))) is None
    fractional = replace(snap, guests=(*snap.guests, Guest("vm:99", "node00", cores=1.5)))
    assert prepare(fractional) is None


@pytest.mark.parametrize("seed", range(40))
def test_capacity_with_n1_counts_what_bisecting_with_survives_counts(seed):
    """The fast search (suspect losses, one full verdict per bound) gives the count the plain
    bisection with `survives` gives wherever the verdict, once failed, stays failed as guests
    are added (what both searches assume). Where it does not (adding a guest changes where the
    recoveries go), the answer is still a count that survives whose next guest does not."""
    from crs.capacity import _allocation_order, _bisected_safe_prefix, capacity, parse_size

    rng = random.Random(1000 + seed)
    snap = random_cluster(rng, nodes=rng.randint(3, 8), roomy=True)
    limits = Limits(cpu_overcommit=rng.choice([2.0, 4.0]))
    size = parse_size(rng.choice(["1c,2g", "2c,4g", "4c,8g"]))
    fast = capacity(snap, size, limits, n1_safe=True)
    plain = capacity(snap, size, limits)
    order = _allocation_order(snap, plain)
    placed = [
        Guest(f"vm:{10**9 + k}", n, cores=size.cores, memory_bytes=size.memory_bytes) for k, n in enumerate(order)
    ]
    verdicts = [survives(replace(snap, guests=snap.guests + tuple(placed[:m])), limits) for m in range(len(placed) + 1)]
    assert sum(fast.per_node.values()) == fast.count
    if verdicts == sorted(verdicts, reverse=True):  # passes, then fails
        assert fast.count == _bisected_safe_prefix(snap, placed, limits) == max(sum(verdicts) - 1, 0)
    else:
        m = fast.count
        nothing_now = m == 0 and not verdicts[0]  # not N+1-safe as it is: nothing more is added
        assert nothing_now or (verdicts[m] and (m == len(placed) or not verdicts[m + 1]))


@pytest.mark.parametrize("seed", range(20))
def test_scores_for_many_decisions_are_bit_for_bit_those_of_one_at_a_time(seed):
    """crs.topsis.scores_columns sums down columns (NumPy's left fold) where `scores` folds with
    cumsum: the same bits, ties included, for any number of decisions from two up."""
    import numpy as np

    from crs.placement import WEIGHTS
    from crs.topsis import scores, scores_columns

    rng = np.random.default_rng(seed)
    alternatives, decisions = int(rng.integers(2, 300)), int(rng.integers(2, 70))
    criteria = [np.round(rng.random((alternatives, decisions)) * 3, int(rng.integers(1, 15))) for _ in WEIGHTS]
    together = scores_columns(criteria, WEIGHTS)
    for d in range(decisions):
        alone = scores(np.column_stack([c[:, d] for c in criteria]), WEIGHTS)
        assert np.array_equal(together[:, d], alone)


@pytest.mark.parametrize("seed", range(20))
def test_one_loss_at_many_counts_in_one_matrix(seed):
    """`survived_with` puts the same loss at several counts of extra guests side by side (the
    capacity search's 32-wide pass): each column's answer is the one `crs.n1` gives alone."""
    rng = random.Random(500 + seed)
    snap = random_cluster(rng, nodes=rng.randint(3, 7), roomy=True)
    prepared = prepare(snap)
    extra = extra_guests(rng, snap, prepared)
    extras = Extras.of(prepared, extra)
    counts = sorted(rng.sample(range(len(extra) + 1), min(len(extra) + 1, 6)))
    for name in prepared.names:
        alone = []
        for count in counts:
            grown = replace(snap, guests=snap.guests + tuple(extra[:count]))
            alone.append(loss_survived(grown, name, Cluster.of(grown), Limits()))
        assert survived_with(prepared, extras, name, counts) == alone, name


def test_a_larger_cluster_past_the_exact_folds_budget(monkeypatch):
    """60 nodes: the per-loss sums of squares go through BLAS's vector kernel, as in crs.placement's
    O(1) criteria; every loss's verdict, with capacity's extra guests, is still crs.n1's."""
    from bench.make_snapshot import synthetic
    from crs.capacity import _allocation_order, _probe, capacity, parse_size
    from crs.snapshot import parse

    monkeypatch.setattr(crs.n1, "EXACT_TOPSIS_CELLS", 0)
    snap = parse(synthetic(60, 900, mode="static"))
    size = parse_size("4c,8g")
    placed = [_probe(size, None, n, k) for k, n in enumerate(_allocation_order(snap, capacity(snap, size)))]
    prepared = prepare(snap)
    extras = Extras.of(prepared, placed)
    count = len(placed) * 3 // 4  # about a third of the losses then fail
    grown = replace(snap, guests=snap.guests + tuple(placed[:count]))
    cluster = Cluster.of(grown)
    verdicts = [loss_survived(grown, name, cluster, Limits()) for name in prepared.names]
    assert [survived_with(prepared, extras, name, [count])[0] for name in prepared.names] == verdicts
    assert 0 < sum(verdicts) < len(verdicts), "some losses are survived, some are not"
    assert (first_failure(prepared, extras, count) is None) == all(verdicts)
