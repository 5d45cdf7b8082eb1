"""Where to start, recover or evacuate one guest (Proxmox `select_service_node`).

The rules narrow the candidates (node affinity priority classes, resource affinity,
the maintenance node to return to), then the mode's score ranks what is left, ties by
node name (reference/proxmox-crs.md §5.3). Scores are always taken over *all* usable
nodes, including ones the rules exclude, because that is how Proxmox normalizes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np

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


def criteria_after(
    base: np.ndarray, src: np.ndarray, src_util: np.ndarray, tgt: np.ndarray, tgt_util: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(1 + RMS, 1 + max) of one resource's utilisation over all nodes, for each of K
    alternatives that change node src[k] to src_util[k] and node tgt[k] to tgt_util[k].

    Folded node by node as Proxmox does, so ties split alike. The +1 keeps tiny loads
    from looking relatively different; the RMS makes an even spread score better when one
    node is already overcommitted. Placement changes one node (src = tgt), a move two.
    """
    k = src.size
    util = np.repeat(base[None, :], k, axis=0)
    util[np.arange(k), src] = src_util
    util[np.arange(k), tgt] = tgt_util
    high = np.zeros(k)
    squares = np.zeros(k)
    for j in range(base.size):
        column = util[:, j]
        high = np.maximum(high, column)
        squares += column * column
    return 1.0 + np.sqrt(squares / base.size), 1.0 + high


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
    closeness = topsis.scores(_placement_criteria(base, guest), WEIGHTS)
    return {s.name: -float(c) for s, c in zip(base, closeness)}


def _placement_criteria(base: list[NodeStats], guest: Guest) -> np.ndarray:
    """N × 4 criteria: alternative k is the cluster with `guest` started (maxima) on node k."""
    cpu, maxcpu = np.array([s.cpu for s in base]), np.array([s.maxcpu for s in base])
    mem, maxmem = np.array([s.mem for s in base]), np.array([s.maxmem for s in base])
    nodes = np.arange(len(base))
    cpu_after = (cpu + np.array([reserved_cpu(guest, s.maxcpu) for s in base])) / maxcpu
    mem_after = (mem + guest.memory_bytes) / maxmem
    average_cpu, highest_cpu = criteria_after(cpu / maxcpu, nodes, cpu_after, nodes, cpu_after)
    average_mem, highest_mem = criteria_after(mem / maxmem, nodes, mem_after, nodes, mem_after)
    return np.column_stack([average_cpu, highest_cpu, average_mem, highest_mem])


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
    if guest.allowed_nodes is not None or guest.requires:  # migrate preconditions and traits narrow it further
        fit = {n.name for n in snapshot.nodes if guest.may_run_on(n)}
        allowed, preferred = allowed & fit, preferred & fit
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
