"""A round's plan: up to `moves_per_round` moves, each the best next move on the snapshot
with the plan's earlier moves applied, down to the target imbalance.

One move per round, judged alone against the margin, leaves a cluster of many small
guests where it is (no single move clears the margin) and pays the hold duration again
after every move; a plan moves far enough at once and lands clearly under the threshold.
A plan never churns: no guest moves twice (so none goes back to a node it left), and a
step must gain more than float noise. Rules, bundles, guards and, outside the `proxmox`
preset, `crs.fits` apply to every step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from . import payoff
from .bundles import Bundle, movable_bundles
from .decision import Move, Step
from .fits import Limits, committed, refusal, room
from .imbalance import NOISE, cluster_imbalance, relative_gain, truncated
from .model import Guards, Settings, Snapshot
from .moves import CHUNK_CELLS, Cluster, Scored, best_bruteforce, best_topsis, lowest_squared, scored, top_moves
from .rules import compile_rules
from .usage import NodeStats, carried_by, demand, node_stats, usable_nodes

ALTERNATIVES = 3  # next-best targets kept per step, for claims that find their target full
LOOKAHEAD = 3  # first moves (the best by themselves) whose best follow-up is weighed, per step
LOOKAHEAD_CELLS = CHUNK_CELLS  # beyond this many bundle × node cells the look-ahead's 4× scoring is not paid


def limits_of(settings: Settings) -> Limits | None:
    """What `crs.fits` checks for every planned move; None under the `proxmox` preset,
    since Proxmox scores nodes and never refuses a full one."""
    if settings.preset == "proxmox":
        return None
    return Limits(memory_reserve_bytes=settings.memory_reserve_bytes, cpu_overcommit=settings.cpu_overcommit)


def target_refusal(snapshot: Snapshot, guests: tuple[str, ...], target: str) -> str | None:
    """Why `target` cannot take `guests` on top of what it carries ("memory", "cpu"); None =
    it can, or the settings' preset does not check (`proxmox`)."""
    limits = limits_of(snapshot.settings)
    if limits is None:
        return None
    node = snapshot.node(target)
    carried = [
        g
        for g in carried_by(snapshot.guests, (target,), frozenset(usable_nodes(snapshot)))[target]
        if g.sid not in guests
    ]
    members = [snapshot.guest(sid) for sid in guests]
    return refusal(node, committed(node, [*carried, *members]), limits)


def plan_moves(
    snapshot: Snapshot, guards: Guards, budget: int, target: float, stats: list[NodeStats]
) -> tuple[tuple[Step, ...], int]:
    """(steps, candidate moves of the first step). The first step is the round's best move
    whatever its gain (the caller judges it against the margin); later ones must gain
    more than NOISE, and the plan stops at `budget` moves or at `target`. `stats` are the
    snapshot's `node_stats` under its mode, which the caller has already summed."""
    settings = snapshot.settings
    mode, scale = settings.mode, settings.imbalance_scale
    rules = compile_rules(snapshot)
    bundles = movable_bundles(snapshot, rules, mode, guards)
    capacity = _Capacity(snapshot, bundles, limits_of(settings))
    before = cluster_imbalance(snapshot, stats)
    moved: set[str] = set()
    steps: list[Step] = []
    candidates = 0
    current = snapshot
    while len(steps) < budget and (not steps or before > target):
        rows = [i for i, b in enumerate(bundles) if moved.isdisjoint(b.guests)]
        cluster = Cluster(stats, [bundles[i] for i in rows], scale, capacity.refused(rows))
        if not steps:
            candidates = cluster.candidate_count()
        chosen = _pick(cluster, settings.method, budget - len(steps))
        if chosen is None:
            break
        moving = chosen.bundle
        following = apply_move(current, moving.guests, moving.node, chosen.target)
        if settings.preset == "proxmox":
            stats_after = _as_if_moved(stats, moving, chosen.target)
        else:
            stats_after = _restat(stats, following, mode, (moving.node, chosen.target))
        after = truncated(cluster_imbalance(following, stats_after))
        gain = relative_gain(before, after)
        if steps and gain <= NOISE:
            break
        paid = _payoff(current, stats, moving, chosen.target, before, after) if payoff.gated(settings) else None
        if steps and paid is not None and not paid.pays(settings.margin):
            break  # a later step that does not pay ends the plan; the first is judged by the caller
        move = Move(moving.leader, moving.guests, moving.node, chosen.target, after, gain, payoff=paid)
        alternatives = _alternatives(cluster, chosen, before)
        steps.append(Step(move, before, after, gain, alternatives, len(steps) - 1 if steps else None))
        if gain <= NOISE or (paid is not None and not paid.pays(settings.margin)):
            break  # the best move is worthless or does not pay: no plan beyond it
        moved.update(moving.guests)
        if any(rules.negative.get(sid) for sid in moving.guests):  # partners' allowed nodes changed
            bundles = movable_bundles(following, rules, mode, guards)
            capacity = _Capacity(following, bundles, capacity.limits)
        else:
            capacity.moved(following, (moving.node, chosen.target))
        current, stats, before = following, stats_after, after
    return tuple(steps), candidates


def _payoff(
    snapshot: Snapshot, stats: list[NodeStats], bundle: Bundle, target: str, before: float, after: float
) -> payoff.Payoff:
    """The step's benefit against its cost (crs.payoff): while its memory is copied the bundle
    counts on its source and on its target, as claims count it; its gain lasts its leader's horizon."""
    both = [replace(s, cpu=s.cpu + bundle.cpu, mem=s.mem + bundle.mem) if s.name == target else s for s in stats]
    during = truncated(cluster_imbalance(snapshot, both))
    guests = {g.sid: g for g in snapshot.guests if g.node == bundle.node}
    memory = sum(guests[sid].memory_bytes for sid in bundle.guests)
    horizon = payoff.horizon(guests[bundle.leader], snapshot.settings)
    return payoff.balancing(before, after, during, memory, horizon, snapshot.settings)


def _pick(cluster: Cluster, method: str, budget: int) -> Scored | None:
    """The step to take: TOPSIS's choice, or the bruteforce best unless, with room for
    two more moves, another of the LOOKAHEAD best first moves leads to a strictly lower
    imbalance after its own best follow-up (fewer live migrations for the same result;
    bench/README.md has what it buys). Large clusters skip the look-ahead."""
    if method == "topsis":
        return best_topsis(cluster)
    greedy = best_bruteforce(cluster)
    if greedy is None or budget < 2 or len(cluster.bundles) * len(cluster.names) > LOOKAHEAD_CELLS:
        return greedy
    options = top_moves(cluster, LOOKAHEAD)
    if len(options) < 2:
        return greedy
    first = min(v for _, _, v in options)

    def two_steps(row: int, col: int, value: float) -> float:
        return min(value, lowest_squared(cluster.after(row, col)))

    row, col = cluster.bundles.index(greedy.bundle), cluster.names.index(greedy.target)
    best_value, best = two_steps(row, col, first), None
    for r, c, v in options:
        if (r, c) != (row, col) and (value := two_steps(r, c, v)) < best_value * (1.0 - NOISE):
            best_value, best = value, (r, c)
    return greedy if best is None else scored(cluster, *best)


def _as_if_moved(stats: list[NodeStats], bundle: Bundle, target: str) -> list[NodeStats]:
    """Proxmox's figures after a move (`proxmox` preset): the bundle's summed demand taken off
    its source (clamped at zero) and added to the target, nothing recounted. A `cores` 0 guest
    thus moves 0 CPU, though where it sits it counts as all of the node's CPUs; the scoring
    (`crs.moves`) does the same sums, so the step's figure is the one Proxmox logs."""
    out = []
    for s in stats:
        if s.name == bundle.node:
            s = replace(s, cpu=max(0.0, s.cpu - bundle.cpu), mem=max(0.0, s.mem - bundle.mem))
        elif s.name == target:
            s = replace(s, cpu=s.cpu + bundle.cpu, mem=s.mem + bundle.mem)
        out.append(s)
    return out


def _restat(stats: list[NodeStats], snapshot: Snapshot, mode: str, changed: tuple[str, str]) -> list[NodeStats]:
    """`node_stats` after a move (`product` preset), as a fresh round will see the cluster: a
    `cores` 0 guest counts as all of its new node's CPUs. Only the move's two nodes change,
    recomputed from their guests in the same order as a full recomputation (the same bits)."""
    part = replace(
        snapshot,
        nodes=tuple(n for n in snapshot.nodes if n.name in changed),
        guests=tuple(g for g in snapshot.guests if g.node in changed or g.target in changed),
    )
    fresh = {s.name: s for s in node_stats(part, mode)}
    return [fresh.get(s.name, s) for s in stats]


def _alternatives(cluster: Cluster, chosen: Scored, before: float) -> tuple[str, ...]:
    """The bundle's next-best allowed targets by imbalance after, among those that help."""
    row = cluster.bundles.index(chosen.bundle)
    cols = np.array([c for c in cluster.allowed_targets(row) if cluster.names[c] != chosen.target], dtype=np.int64)
    if cols.size == 0:
        return ()
    loads = cluster.exact_loads(np.full(cols.size, row), cols)
    after = loads.std(axis=1) / loads.mean(axis=1)
    if cluster.scale == "normalized":
        after /= np.sqrt(len(cluster.names) - 1)
    order = np.lexsort((cols, after))
    return tuple(cluster.names[cols[i]] for i in order[:ALTERNATIVES] if after[i] < before)


class _Capacity:
    """Which (bundle, node) `crs.fits` refuses: each node's room against every bundle at once,
    asked again only for the two nodes a step changed."""

    def __init__(self, snapshot: Snapshot, bundles: list[Bundle], limits: Limits | None) -> None:
        self.limits = limits
        self.bundles = bundles
        self.names = usable_nodes(snapshot)
        if limits is None:
            return
        self.matrix = np.zeros((len(bundles), len(self.names)), dtype=bool)  # True = refused
        guests = {g.sid: g for g in snapshot.guests}
        # A bundle's own commitment: fixed cores and memory, plus its guests that take all of a node's CPUs (cores 0).
        self.memory = np.array([sum(guests[sid].memory_bytes for sid in b.guests) for b in bundles], dtype=float)
        self.cores = np.array([sum(max(guests[sid].cores, 0.0) for sid in b.guests) for b in bundles], dtype=float)
        self.whole = np.array([sum(guests[sid].cores <= 0 for sid in b.guests) for b in bundles], dtype=float)
        self._ask(snapshot, self.names)

    def refused(self, rows: list[int]) -> np.ndarray | None:
        return None if self.limits is None else self.matrix[rows]

    def moved(self, snapshot: Snapshot, nodes: tuple[str, str]) -> None:
        if self.limits is not None:
            self._ask(snapshot, nodes)

    def _ask(self, snapshot: Snapshot, names: Iterable[str]) -> None:
        """Refresh the columns of `names` from what their nodes carry in `snapshot`."""
        cols = {name: self.names.index(name) for name in names}
        carried = carried_by(snapshot.guests, cols, frozenset(self.names))
        for name, col in cols.items():
            node = snapshot.node(name)
            left = room(node, committed(node, carried[name]), self.limits)  # type: ignore[arg-type]
            cores = self.cores + self.whole * node.cpus
            self.matrix[:, col] = (self.memory > left.memory_bytes) | (cores > left.cores)


def apply_move(snapshot: Snapshot, guests: tuple[str, ...], source: str, target: str) -> Snapshot:
    """The snapshot after `guests` moved from `source` to `target`: they sit on the target,
    and measured node usage, where given, shifts with them (clamped at zero, as in Proxmox)."""
    members = set(guests)
    mode = snapshot.settings.mode
    cpu = mem = 0.0
    for g in snapshot.guests:
        if g.sid in members:
            c, m = demand(g, "dynamic")
            cpu, mem = cpu + c, mem + m
    moved = tuple(replace(g, node=target) if g.sid in members else g for g in snapshot.guests)
    nodes = []
    for n in snapshot.nodes:
        if n.cpu_usage is not None and mode == "dynamic" and n.name in (source, target):
            sign = -1.0 if n.name == source else 1.0
            n = replace(
                n,
                cpu_usage=max(0.0, n.cpu_usage + sign * cpu),
                mem_usage_bytes=max(0.0, (n.mem_usage_bytes or 0.0) + sign * mem),
            )
        nodes.append(n)
    return replace(snapshot, guests=moved, nodes=tuple(nodes))
