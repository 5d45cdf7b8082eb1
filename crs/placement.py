"""Where to start, recover or evacuate one guest (Proxmox `select_service_node`).

The rules narrow the candidates (node affinity priority classes, resource affinity,
the maintenance node to return to), then the mode's score ranks what is left, ties by
node name (reference/proxmox-crs.md §5.3). Scores are always taken over *all* usable
nodes, including ones the rules exclude, because that is how Proxmox normalizes them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

from . import topsis
from .model import Guest, Snapshot
from .rules import CompiledRules, compile_rules, majority_node, node_affinity, resource_affinity
from .usage import NodeStats, node_stats, reserved_cpu

Preference = Literal["best-score", "none", "try-next"]

# Proxmox's placement criteria: (name, weight); negative = lower is better. Memory weighs
# 15/18 in total, and the "highest" criteria twice the "average" ones.
CRITERIA: tuple[tuple[str, float], ...] = (
    ("average cpu", -1.0),
    ("highest cpu", -2.0),
    ("average memory", -5.0),
    ("highest memory", -10.0),
)
WEIGHTS = tuple(w for _, w in CRITERIA)


def criteria_vector(stats: Iterable[NodeStats]) -> tuple[float, float, float, float]:
    """(1+RMS cpu, 1+max cpu, 1+RMS mem, 1+max mem) over all nodes, as Proxmox folds them.

    The +1 keeps tiny loads from looking relatively different; the RMS makes an even
    spread score better when one node is already overcommitted.
    """
    count = 0
    high_cpu = squares_cpu = high_mem = squares_mem = 0.0
    for s in stats:
        count += 1
        cpu, mem = s.cpu_load, s.mem_load
        high_cpu = max(high_cpu, cpu)
        squares_cpu += cpu * cpu
        high_mem = max(high_mem, mem)
        squares_mem += mem * mem
    return (1.0 + math.sqrt(squares_cpu / count), 1.0 + high_cpu, 1.0 + math.sqrt(squares_mem / count), 1.0 + high_mem)


def score_nodes(snapshot: Snapshot, sid: str, mode: str | None = None) -> dict[str, float]:
    """Node → score for placing `sid` there; lower is better in every mode.

    basic: the number of guests counted on the node. static/dynamic: minus the TOPSIS
    closeness of "the cluster with the guest on that node" (Proxmox negates it too).
    """
    mode = mode or snapshot.settings.mode
    guest = snapshot.guest(sid)
    base = node_stats(snapshot, mode, purpose="placement")
    if mode == "basic":
        return {s.name: s.cpu for s in base}
    matrix = [criteria_vector(_with_guest(base, k, guest)) for k in range(len(base))]
    closeness = topsis.scores(matrix, WEIGHTS)
    return {s.name: -float(c) for s, c in zip(base, closeness)}


def _with_guest(base: list[NodeStats], index: int, guest: Guest) -> list[NodeStats]:
    """The node stats as if `guest` were started (with its maxima) on base[index]."""
    out = list(base)
    s = base[index]
    out[index] = NodeStats(s.name, s.cpu + reserved_cpu(guest, s.maxcpu), s.maxcpu, s.mem + guest.memory_bytes, s.maxmem)
    return out


def select_node(
    snapshot: Snapshot,
    sid: str,
    preference: Preference = "best-score",
    *,
    rules: CompiledRules | None = None,
    failback: bool = True,
    maintenance_node: str | None = None,
    tried: Iterable[str] = (),
) -> str | None:
    """The node `sid` should be on, or None when no node is possible (it stays put)."""
    rules = rules if rules is not None else compile_rules(snapshot)
    guest = snapshot.guest(sid)
    online = sorted(n.name for n in snapshot.nodes if n.usable)
    guests = {g.sid: g for g in snapshot.guests}
    allowed, preferred = node_affinity(rules, sid, online)
    if not preferred:
        return None
    together, separate = resource_affinity(rules, sid, guests, online)
    current = guest.node
    if preference == "none" and not failback and current in allowed:
        if together.get(current) or current not in separate:
            return current  # no failback: stay wherever the rules still allow
    if preference == "try-next":
        preferred -= set(tried)
    preferred -= separate
    majority = majority_node(together, preferred)
    if majority is not None:
        preferred = {majority}
    if maintenance_node in preferred:
        return maintenance_node
    if preference == "none" and current in preferred:
        return current
    if not preferred:
        return None
    scores = score_nodes(snapshot, sid)
    ranked = sorted(preferred, key=lambda n: (scores[n], n))
    if preference == "try-next" and current in ranked:
        position = ranked.index(current)
        return ranked[position + 1] if position + 1 < len(ranked) else ranked[0]
    return ranked[0]
