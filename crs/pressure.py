"""Which guests hurt, which first, and where they go: the VM-centric pressure policy.

Proxmox balances percentages (even load); admins feel stalls. This is Derumier's
"add vm loadbalancing" series for pve-ha-manager (reference/vm-balancer.md §6), ported
faithfully and then given the product's units: a guest hurts when it stalls on CPU
longer than a limit, or when its node's memory is above 85 % of RAM (80 % once KSM
already shares a fifth of it); hurting guests are ranked by TOPSIS over (affinity,
CPU pressure, memory pseudo-pressure, total CPU, memory) with the series' AHP weights,
and the first that has a target moves. The seed spells one criterion `total_cpu` in its
preference table and `totalcpu` in its order; they are read as one criterion here
(reading B of §2), which is what the series evidently meant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from . import ahp, topsis
from .model import Guest, Node, Pressure, Snapshot
from .placement import select_node

CRITERIA = ("affinity", "cpu_pressure", "memory_pressure", "total_cpu", "memory")
# The seed's `compute_ahp_weights` table: "i is v times as important as j".
PREFERENCES = {
    ("affinity", "cpu_pressure"): 9,
    ("affinity", "memory_pressure"): 9,
    ("affinity", "memory"): 9,
    ("affinity", "total_cpu"): 9,
    ("cpu_pressure", "memory_pressure"): 3,
    ("cpu_pressure", "memory"): 3,
    ("cpu_pressure", "total_cpu"): 5,
    ("memory_pressure", "memory"): 3,
    ("memory_pressure", "total_cpu"): 3,
    ("memory", "total_cpu"): 2,
}
# Directions: the worst-off guests first, and of those the cheapest to move (least CPU, memory).
DIRECTIONS = (1.0, 1.0, 1.0, -1.0, -1.0)
WEIGHTS = ahp.weights(CRITERIA, PREFERENCES)
GIB = 2**30


@dataclass(frozen=True, slots=True)
class Limits:
    """When a guest hurts. The seed compares CPU pressure with 0.75 in PSI's percent unit
    (0.75 % of the time stalled); in the contract's fractions the product's default is 0.10:
    a guest waiting a tenth of its time for a CPU is visibly slowed, and idle-cluster noise
    (well under 1 %) never reaches it."""

    cpu: float = 0.10  # CPU pressure (some) above which a guest hurts; strict, as the seed
    memory: float = 0.85  # node memory use, fraction of RAM, above which its guests hurt
    memory_ksm: float = 0.80  # the same once KSM shares more than `ksm_share` of RAM
    ksm_share: float = 0.20
    min_uptime_s: float = 300.0  # younger guests are still booting: skipped
    containers: bool = False  # containers move only with a restart (downtime)
    cpu_headroom: float = (
        0.0  # share of a target's CPU threads kept free after the move (0.2 cost more moves, bench/README.md)
    )


@dataclass(frozen=True, slots=True)
class Hurting:
    """One guest that hurts, with the criteria it is ranked on and why it hurts."""

    sid: str
    node: str
    affinity: float  # 1 when the guest breaks an affinity rule
    cpu_pressure: float
    memory_pressure: float  # the seed's pseudo-pressure: the node's excess over its limit / guest memory
    total_cpu: float  # cores in use
    memory_bytes: float  # memory in use
    reasons: tuple[str, ...]
    cpu_relief: float = -1.0  # the CPU criterion ranked on; < 0: the CPU pressure itself

    def criteria(self) -> tuple[float, ...]:
        cpu = self.cpu_pressure if self.cpu_relief < 0 else self.cpu_relief
        return (self.affinity, cpu, self.memory_pressure, self.total_cpu, self.memory_bytes)


def has_data(snapshot: Snapshot) -> bool:
    """False when the source reports no pressure at all (Proxmox VE 8): the policy stays idle."""
    return any(g.pressure is not None for g in snapshot.guests) or any(n.pressure is not None for n in snapshot.nodes)


def memory_limit(node: Node, limits: Limits) -> float:
    """The node's memory use above which its guests hurt, in bytes."""
    share = limits.memory_ksm if node.ksm_bytes > limits.ksm_share * node.memory_bytes else limits.memory
    return node.memory_bytes * share


class Use(NamedTuple):
    cpu: float  # cores
    memory: float  # bytes


def node_use(snapshot: Snapshot) -> dict[str, Use]:
    """Each node's CPU and memory in use: its own measurement, else the sum of its guests'.
    One pass over the guests for every node: a pass per node made a 1000-node × 20 000-guest
    plan spend 0.4 s of its 1 s here (issue 35). The sums add in guest order, as before."""
    cpu = {n.name: 0.0 for n in snapshot.nodes}
    memory = dict(cpu)
    if any(n.cpu_usage is None or n.mem_usage_bytes is None for n in snapshot.nodes):
        for g in snapshot.guests:
            if g.node in cpu:
                cpu[g.node] += g.cpu_usage
                memory[g.node] += g.mem_usage_bytes
    return {
        n.name: Use(
            cpu[n.name] if n.cpu_usage is None else n.cpu_usage,
            memory[n.name] if n.mem_usage_bytes is None else n.mem_usage_bytes,
        )
        for n in snapshot.nodes
    }


def cpu_stall(used: float, node: Node) -> float:
    """The share of time a node's guests wait when its CPU demand exceeds its threads (the
    simulator's contention model): the expected stall after a move, before it is measured."""
    return contention(used, node.cpus)


def contention(used: float, threads: float) -> float:
    """The share of time guests wanting `used` cores wait on `threads` (the simulator's contention model)."""
    return max(0.0, used - threads) / used if used > 0 else 0.0


@dataclass(frozen=True, slots=True)
class Shortfall:
    """The cluster as a whole lacks CPU or memory: what its guests want against what its usable
    nodes have, and the node that would cover the difference (the smallest of the cluster's own
    sizes that does, or several of its largest)."""

    resource: str  # "cpu" (cores on threads) or "memory" (bytes on the nodes' memory limits)
    wanted: float
    have: float
    node_size: float  # threads, or bytes of RAM, of the node to add
    nodes: int = 1

    @property
    def short(self) -> float:
        return self.wanted - self.have

    def figures(self) -> str:
        """ "the guests want 181.6 cores on 144 threads, 38 cores short"."""
        if self.resource == "cpu":
            return (
                f"the guests want {self.wanted:.1f} cores on {self.have:g} threads, {math.ceil(self.short)} cores short"
            )
        return (
            f"the guests use {self.wanted / GIB:.0f} GiB of memory on {self.have / GIB:.0f} GiB under the nodes' "
            f"limits, {math.ceil(self.short / GIB)} GiB short"
        )

    def remedy(self) -> str:
        """ "add a node of 48 threads"."""
        size = f"{self.node_size:g} threads" if self.resource == "cpu" else f"{self.node_size / GIB:.0f} GiB"
        return f"add {'a node' if self.nodes == 1 else f'{self.nodes} nodes'} of {size}"


def shortfall(snapshot: Snapshot, limits: Limits) -> tuple[Shortfall, ...]:
    """Where no placement can help now: the usable nodes' guests together want so much more CPU
    than all their threads that, spread perfectly, they would still stall beyond the limit; or
    use more memory than all the nodes' memory limits together. A pressure move then only
    shifts the stall from one node's guests to another's (and a migration adds load to both
    ends); on the Bitbrains day such peaks (181.6 cores on 144 threads) ended by the next
    sample, and the moves made at them relieved next to nobody (bench/README.md, "Objective
    both: fewer migrations"). The answer is another node."""
    usable = [n for n in snapshot.nodes if n.usable]
    out = []
    unmeasured = {n.name for n in usable if n.cpu_usage is None}
    demand = sum(n.cpu_usage or 0.0 for n in usable) + sum(g.cpu_usage for g in snapshot.guests if g.node in unmeasured)
    threads = float(sum(n.cpus for n in usable))
    if contention(demand, threads) > limits.cpu:
        out.append(_short_of("cpu", demand, threads, [(float(n.cpus), float(n.cpus)) for n in usable]))
    use = node_use(snapshot)
    used = sum(use[n.name].memory for n in usable)
    room = sum(memory_limit(n, limits) for n in usable)
    if used > room:
        out.append(_short_of("memory", used, room, [(n.memory_bytes, memory_limit(n, limits)) for n in usable]))
    return tuple(out)


def _short_of(resource: str, wanted: float, have: float, sizes: list[tuple[float, float]]) -> Shortfall:
    """`sizes`: each usable node's size and what of it counts (all its threads; RAM up to its limit)."""
    short = wanted - have
    covering = [size for size, counted in sizes if counted >= short]
    if covering:
        return Shortfall(resource, wanted, have, min(covering))
    largest, counted = max(sizes)
    return Shortfall(resource, wanted, have, largest, math.ceil(short / counted))


def cluster_short(snapshot: Snapshot, limits: Limits) -> str | None:
    """Why no pressure move can help now (`shortfall`), or None."""
    found = shortfall(snapshot, limits)
    if not found:
        return None
    figures = [
        f.figures()
        + (
            f": spread evenly they would still stall {contention(f.wanted, f.have):.0%} of the time "
            f"(limit {limits.cpu:.0%})"
            if f.resource == "cpu"
            else ""
        )
        for f in found
    ]
    return f"no placement can help: {'; '.join(figures)}; {' and '.join(f.remedy() for f in found)}"


def recurrence(found: list[tuple[float, Shortfall]], days: int, day_s: float = 86_400.0) -> str:
    """One line an admin reads for a resource the cluster lacked at some rounds (`found`: each
    round's trace second since midnight of day 1, and its shortfall): how short at the worst
    peak, on how many of `days` days, the hours that hold most of it (the shortest span of
    whole hours with 80 % of the short rounds), and what to add. The rounds' own windows
    stay with the caller's figures."""
    peak = max(found, key=lambda f: f[1].short)[1]
    hours = [0] * 24
    for t, _ in found:
        hours[int(t % day_s // 3600)] += 1
    spans = [(b - a, a, b) for a in range(24) for b in range(a, 24) if sum(hours[a : b + 1]) >= 0.8 * len(found)]
    _, first, last = min(spans)
    seen = len({int(t // day_s) for t, _ in found})
    size = f"{math.ceil(peak.short)} cores" if peak.resource == "cpu" else f"{math.ceil(peak.short / GIB)} GiB"
    when = f"on {seen} of {days} day{'s' if days > 1 else ''}, mostly {first:02d}:00–{last + 1:02d}:00"
    return f"short of {size} at peaks {when}; {peak.remedy()}"


def skip_reason(guest: Guest, online: set[str], limits: Limits, last_moved: str | None) -> str | None:
    """Why the policy does not look at `guest` at all, in the seed's order; None = it does."""
    if guest.kind == "ct" and not limits.containers:
        return "a container cannot live-migrate"
    if guest.state != "started" or not guest.running:
        return "not running"
    if guest.sid == last_moved:
        return "moved last"
    if guest.node not in online:
        return "its node is not online"
    if guest.uptime_s is not None and guest.uptime_s < limits.min_uptime_s:
        return f"up for {guest.uptime_s:.0f} s, less than {limits.min_uptime_s:.0f} s"
    return None


def hurting(
    snapshot: Snapshot, limits: Limits, *, last_moved: str | None = None, breaking: frozenset[str] = frozenset()
) -> tuple[Hurting, ...]:
    """The guests that hurt, in snapshot order. `breaking`: guests in breach of an affinity
    rule; they only rank higher here (the breach itself is fixed by a rule-fix move)."""
    online = {n.name for n in snapshot.nodes if n.usable}
    nodes = {n.name: n for n in snapshot.nodes}
    use = node_use(snapshot)
    used = {n.name: use[n.name].memory for n in snapshot.nodes}
    excess = {n.name: use[n.name].cpu - n.cpus for n in snapshot.nodes}
    out = []
    for guest in snapshot.guests:
        if skip_reason(guest, online, limits, last_moved) is not None:
            continue
        node = nodes[guest.node]
        cpu = guest.pressure.cpu_some if guest.pressure else 0.0
        reasons = []
        if cpu > limits.cpu:
            reasons.append(f"stalls on CPU {cpu:.0%} of the time (limit {limits.cpu:.0%})")
        limit = memory_limit(node, limits)
        memory = 0.0
        if used[node.name] > limit:
            reasons.append(
                f"{node.name} uses {used[node.name] / node.memory_bytes:.0%} of its memory "
                f"(limit {limit / node.memory_bytes:.0%})"
            )
            if used[node.name] - guest.mem_usage_bytes < limit and guest.mem_usage_bytes > 0:
                memory = (used[node.name] - limit) / guest.mem_usage_bytes
        affinity = 1.0 if guest.sid in breaking else 0.0
        # Where the node's CPU demand exceeds its threads every guest on it stalls alike, and
        # the seed's tie-breakers (least CPU first) would move the guests that relieve least:
        # there the CPU criterion is the stall share this guest's leaving takes away.
        over = excess[node.name]
        relief_share = cpu * min(1.0, guest.cpu_usage / over) if over > 0 else -1.0
        if reasons or affinity:
            out.append(
                Hurting(
                    guest.sid,
                    guest.node,
                    affinity,
                    cpu,
                    memory,
                    guest.cpu_usage,
                    guest.mem_usage_bytes,
                    tuple(reasons) or ("breaks an affinity rule",),
                    relief_share,
                )
            )
    return tuple(out)


def ranked(guests: tuple[Hurting, ...]) -> list[tuple[Hurting, float]]:
    """Hurting guests, first to move first, with their TOPSIS closeness (the AHP weights,
    signed by direction). Columns that are zero for every guest (affinity, when no rule is
    broken) drop out instead of dividing by zero."""
    if not guests:
        return []
    matrix = np.array([g.criteria() for g in guests], dtype=float)
    signed = tuple(w * d for w, d in zip(WEIGHTS.weights, DIRECTIONS))
    closeness = topsis.scores(matrix, signed)
    order = np.argsort(-closeness, kind="stable")
    return [(guests[i], float(closeness[i])) for i in order]


@dataclass(frozen=True, slots=True)
class Relief:
    """A pressure move: the guest that hurts most and can go somewhere, and where."""

    guest: Hurting
    target: str
    score: float  # its TOPSIS closeness among the hurting guests
    relief: float  # the stall share expected to end: its CPU pressure, or the memory pseudo-pressure
    basis: str = ""  # what decides the CPU relief: the measured stall or core contention (`cpu_basis`)

    @property
    def reason(self) -> str:
        why = "; ".join(self.guest.reasons)
        basis = f" ({self.basis})" if self.basis else ""
        return f"{self.guest.sid} on {self.guest.node} hurts: {why}. Moving it to {self.target}{basis}."


def contended(snapshot: Snapshot, node: str) -> bool:
    """True when core counts explain a stall on `node`: its guests want more CPU than its threads."""
    return cpu_stall(node_use(snapshot)[node].cpu, snapshot.node(node)) > 0.0


def cpu_basis(snapshot: Snapshot, node: str) -> str:
    """What decides whether moving a guest off `node` ends its CPU stall. Where core counts
    explain the stall (the simulator's figures are made that way), contention predicts what a
    move leaves; where they do not (a node with idle threads that still reports a stall), the
    measured stall decides, as in the seed: the guest moves to a node that stays under its limits."""
    n = snapshot.node(node)
    used = node_use(snapshot)[node].cpu
    if cpu_stall(used, n) > 0.0:
        return f"core contention: {node} has {used:.1f} cores wanted on {n.cpus:g} threads"
    return f"measured stall: {node} has {used:.1f} of {n.cpus:g} threads in use, so core counts do not explain it"


def target(snapshot: Snapshot, guest: Hurting, limits: Limits, barred: frozenset[str] = frozenset()) -> str | None:
    """Where `guest` goes: the node Proxmox's recovery placement would pick were its node to
    fail, skipping nodes that would themselves cross the memory limit, already stall on CPU
    or would stall once its CPU demand arrives (the seed's "same as for service recovery",
    without moving the pain elsewhere)."""
    excluded = {guest.node} | set(barred)
    use = node_use(snapshot)
    while True:
        nodes = tuple(replace(n, online=False) if n.name in excluded else n for n in snapshot.nodes)
        pick = select_node(replace(snapshot, nodes=nodes), guest.sid, "best-score")
        if pick is None or pick in excluded:
            return None
        node = snapshot.node(pick)
        after = use[pick].memory + guest.memory_bytes
        stalled = node.pressure is not None and node.pressure.cpu_some > limits.cpu
        short = cpu_stall(use[pick].cpu + guest.total_cpu, node) > 0.0
        if after <= memory_limit(node, limits) and not stalled and not short:
            return pick
        excluded.add(pick)


def relief(
    snapshot: Snapshot,
    limits: Limits,
    *,
    last_moved: str | None = None,
    breaking: frozenset[str] = frozenset(),
    in_cooldown: frozenset[str] = frozenset(),
    barred: frozenset[tuple[str, str]] = frozenset(),
) -> Relief | None:
    """The first hurting guest, in TOPSIS order, that has a target (the seed: one per check).
    guests `in_cooldown` or locked (Proxmox refuses their migration) are ranked but not moved;
    `barred` (guest, node) pairs are no target."""
    locked = frozenset(g.sid for g in snapshot.guests if g.locked)
    for guest, score in ranked(hurting(snapshot, limits, last_moved=last_moved, breaking=breaking)):
        if guest.sid in in_cooldown or guest.sid in locked:
            continue
        node = target(snapshot, guest, limits, frozenset(n for sid, n in barred if sid == guest.sid))
        if node is not None:
            basis = cpu_basis(snapshot, guest.node) if guest.cpu_pressure > limits.cpu else ""
            return Relief(guest, node, score, max(guest.cpu_pressure, guest.memory_pressure), basis)
    return None


def net_relief(
    hurting_before: int, after: Snapshot, sources: list[str], limits: Limits, lasting: frozenset[str] = frozenset()
) -> int:
    """The guests a pressure plan brings under the limits, of `hurting_before` (`after` is the
    snapshot `settled` expects it to leave), not counting a moved guest whose source node is
    still short of CPU as a whole, unless that node's stall is `lasting` (seen at the round
    before too). Moving a guest out of a node short of CPU relieves that guest but leaves the
    others stalling; in the replay such moves at a new stall made most of `both`'s extra
    migrations while the peak ended on its own (bench/README.md). A lasting stall is relieved a
    few moves a round. "Short" is core contention's verdict: a node stalling with idle threads
    is no peak that contention ends, and there the moved guest's measured stall decides.
    A plan with no net relief is not made."""
    still = sum(
        1 for node in sources if node not in lasting and _stalls_whole(after, node, limits) and contended(after, node)
    )
    return hurting_before - len(hurting(after, limits)) - still


def stalled_nodes(snapshot: Snapshot, limits: Limits) -> tuple[str, ...]:
    """The nodes short of CPU as a whole (their own CPU pressure beyond the limit)."""
    return tuple(n.name for n in snapshot.nodes if _stalls_whole(snapshot, n.name, limits))


def _stalls_whole(snapshot: Snapshot, node: str, limits: Limits) -> bool:
    """True when `node` itself reports CPU pressure beyond the limit (short of CPU as a whole)."""
    p = snapshot.node(node).pressure
    return p is not None and p.cpu_some > limits.cpu


def settled(snapshot: Snapshot, move: Relief) -> Snapshot:
    """The snapshot after `move`, with the pressure it is expected to leave: usage shifts with
    the guest, the source's guests stall in proportion to the contention left (unchanged where
    their stall has another cause), and the guest takes its target's expected stall. A round
    plans its next pressure move on this, not on stale figures."""
    g = move.guest
    nodes = {n.name: n for n in snapshot.nodes}
    use = node_use(snapshot)
    before = {name: cpu_stall(use[name].cpu, nodes[name]) for name in (g.node, move.target)}
    moved = tuple(replace(x, node=move.target) if x.sid == g.sid else x for x in snapshot.guests)
    shifted = tuple(
        replace(
            n,
            cpu_usage=None
            if n.cpu_usage is None
            else max(0.0, n.cpu_usage + (g.total_cpu if n.name == move.target else -g.total_cpu)),
            mem_usage_bytes=None
            if n.mem_usage_bytes is None
            else max(0.0, n.mem_usage_bytes + (g.memory_bytes if n.name == move.target else -g.memory_bytes)),
        )
        if n.name in before
        else n
        for n in snapshot.nodes
    )
    after_snapshot = replace(snapshot, guests=moved, nodes=shifted)
    use_after = node_use(after_snapshot)
    after = {n.name: cpu_stall(use_after[n.name].cpu, n) for n in shifted if n.name in before}

    def eased(p: Pressure | None, node: str) -> Pressure | None:
        if p is None:
            return None
        if node == g.node and before[node] > 0:
            return replace(p, cpu_some=p.cpu_some * after[node] / before[node])
        if node == move.target:
            return replace(p, cpu_some=max(p.cpu_some, after[node]))
        return p

    guests = tuple(
        (replace(x, pressure=replace(x.pressure, cpu_some=after[move.target])) if x.pressure else x)
        if x.sid == g.sid
        else replace(x, pressure=eased(x.pressure, x.node))
        if x.node in before
        else x
        for x in moved
    )
    nodes_out = tuple(replace(n, pressure=eased(n.pressure, n.name)) if n.name in before else n for n in shifted)
    return replace(after_snapshot, guests=guests, nodes=nodes_out)
