"""Where to start, recover or evacuate one guest (Proxmox `select_service_node`).

The rules narrow the candidates (node affinity priority classes, resource affinity,
the maintenance node to return to), then the mode's score ranks what is left, ties by
node name (reference/proxmox-crs.md §5.3). Scores are always taken over *all* usable
nodes, including ones the rules exclude, because that is how Proxmox normalizes them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from . import topsis
from .model import Guest, Snapshot
from .rules import CompiledRules, compile_rules, majority_node, node_affinity, resource_affinity
from .usage import node_stats

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
EXACT_TOPSIS_CELLS = 1 << 24  # up to this many alternative × node cells of work, criteria are folded exactly


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


def criteria_incremental(
    base: np.ndarray, src: np.ndarray, src_util: np.ndarray, tgt: np.ndarray, tgt_util: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`criteria_after` in O(1) per alternative (sum of squares adjusted at two nodes, max from
    the top three): for work past EXACT_TOPSIS_CELLS, where it may differ from the fold in the
    last bits, which only matters between alternatives that tie to ~1e-15. Where src and tgt
    are one node (a placement), that node changes once, to tgt_util, as in the fold."""
    one = src == tgt
    src_util = np.where(one, tgt_util, src_util)
    squares = (
        float(np.dot(base, base))
        - base[src] ** 2
        - np.where(one, 0.0, base[tgt] ** 2)
        + np.where(one, 0.0, src_util**2)
        + tgt_util**2
    )
    top, values = top_three(base)
    first_out = (src == top[0]) | (tgt == top[0])
    second_out = (src == top[1]) | (tgt == top[1])
    others = np.where(first_out, np.where(second_out, values[2], values[1]), values[0])  # max of the untouched
    high = np.maximum(np.maximum(others, src_util), tgt_util)
    return 1.0 + np.sqrt(np.maximum(squares, 0.0) / base.size), 1.0 + high


def top_three(base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, utilisations) of the three highest, highest first; on fewer nodes padded with
    node -1 at 0, which no move touches. A move's highest untouched node is among them."""
    top = np.argpartition(base, -3)[-3:] if base.size > 3 else np.arange(base.size)
    top = top[np.argsort(base[top])[::-1]]
    values = np.concatenate([base[top], np.zeros(3 - top.size)])
    return np.concatenate([top, np.full(3 - top.size, -1)]), values


@dataclass(slots=True)
class Occupancy:
    """The cluster as placement sees it: usable nodes (name order) with their placement
    demand, and every guest where it is now. A what-if that places guests one after another
    (N+1: a node's HA guests recovered in sid order, each counted before the next) updates it
    by the moved guest's own demand instead of summing the whole cluster again per guest."""

    guests: MutableMapping[str, Guest]
    names: list[str]
    cpu: np.ndarray
    maxcpu: np.ndarray
    mem: np.ndarray
    maxmem: np.ndarray
    exact: bool = True  # fold the criteria exactly (Proxmox's order); False past EXACT_TOPSIS_CELLS of work

    @classmethod
    def of(cls, snapshot: Snapshot, mode: str | None = None) -> Occupancy:
        stats = node_stats(snapshot, mode or snapshot.settings.mode, purpose="placement")
        return cls(
            {g.sid: g for g in snapshot.guests},
            [s.name for s in stats],
            np.array([s.cpu for s in stats]),
            np.array([s.maxcpu for s in stats]),
            np.array([s.mem for s in stats]),
            np.array([s.maxmem for s in stats]),
        )

    def index(self, name: str) -> int:
        return bisect_left(self.names, name)


def score_nodes(snapshot: Snapshot, sid: str, mode: str | None = None) -> dict[str, float]:
    """Node → score for placing `sid` there; lower is better in every mode.

    basic: the number of guests counted on the node. static/dynamic: minus the TOPSIS
    closeness of "the cluster with the guest on that node" (Proxmox negates it too).
    """
    mode = mode or snapshot.settings.mode
    occupancy = Occupancy.of(snapshot, mode)
    return dict(zip(occupancy.names, placement_scores(occupancy, snapshot.guest(sid), mode).tolist()))


def placement_scores(occupancy: Occupancy, guest: Guest, mode: str) -> np.ndarray:
    """`score_nodes` as an array over `occupancy.names`."""
    if mode == "basic":
        return occupancy.cpu.copy()
    return -topsis.scores(_placement_criteria(occupancy, guest), WEIGHTS)


def _placement_criteria(occupancy: Occupancy, guest: Guest) -> np.ndarray:
    """N × 4 criteria: alternative k is the cluster with `guest` started (maxima) on node k."""
    cpu, maxcpu, mem, maxmem = occupancy.cpu, occupancy.maxcpu, occupancy.mem, occupancy.maxmem
    nodes = np.arange(len(occupancy.names))
    cpu_after = (cpu + (guest.cores if guest.cores > 0 else maxcpu)) / maxcpu  # reserved_cpu, per node
    mem_after = (mem + guest.memory_bytes) / maxmem
    fold = criteria_after if occupancy.exact else criteria_incremental
    average_cpu, highest_cpu = fold(cpu / maxcpu, nodes, cpu_after, nodes, cpu_after)
    average_mem, highest_mem = fold(mem / maxmem, nodes, mem_after, nodes, mem_after)
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
    occupancy: Occupancy | None = None,
) -> str | None:
    """The node `sid` should be on, or None when no node is possible (it stays put).
    `occupancy`: the snapshot as placement sees it, when the caller keeps it up to date."""
    rules = rules if rules is not None else compile_rules(snapshot)
    occupancy = occupancy or Occupancy.of(snapshot)
    guests = occupancy.guests
    guest = guests[sid]
    online = occupancy.names
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
    scores = placement_scores(occupancy, guest, snapshot.settings.mode)
    if preference == "try-next" and current in preferred:
        ranked = sorted(preferred, key=lambda n: (scores[occupancy.index(n)], n))
        position = ranked.index(current)
        return ranked[position + 1] if position + 1 < len(ranked) else ranked[0]
    if len(preferred) == len(online):  # every node: the lowest score, ties to the first name
        return online[int(np.argmin(scores))]
    return min(preferred, key=lambda n: (scores[occupancy.index(n)], n))
