"""N+1: would the cluster survive losing any one node right now?

For each usable node "if it failed now": its HA guests are recovered as Proxmox's manager
recovers them (`crs.placement.select_node`, best score, in sid order, each placement
counted before the next, §6.1a), then the capacity rule (`crs.fits`) says which nodes no
longer fit what they would hold. A guest that finds no node (strict rules, every candidate
holding a negative partner), or cannot be recovered at all (`recoverable` False: local
disks, passed-through devices), is lost. Guests not managed by HA stay down with their
node; they are named, not placed.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from .fits import Commitment, Limits, committed, guest_cores, refusal
from .model import Guest, Node, Snapshot
from .placement import EXACT_TOPSIS_CELLS, Occupancy, select_node
from .rules import CompiledRules, compile_rules
from .usage import carried_by, counted_demand, counted_nodes

NOT_RECOVERED = frozenset({"disabled", "ignored"})  # Proxmox recovers started and stopped guests alike


@dataclass(frozen=True, slots=True)
class Recovery:
    sid: str
    target: str | None  # None: lost
    why_lost: str = ""  # "not recoverable" | "no node allowed"


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """What a node would hold after the loss, against its limits (fractions; above 1 = does not fit)."""

    node: str
    cores: float
    memory_bytes: float
    cpu: float
    memory: float
    refusal: str | None  # "memory" | "cpu" when it does not fit


@dataclass(frozen=True, slots=True)
class NodeLoss:
    node: str
    recoveries: tuple[Recovery, ...]
    loads: tuple[NodeLoad, ...]  # every node left, after the recoveries
    overloaded: tuple[NodeLoad, ...]  # nodes that take recovered guests and then do not fit
    lost: tuple[str, ...]
    down: tuple[str, ...]  # running guests not managed by HA: they stay down with the node

    @property
    def survived(self) -> bool:
        return not self.overloaded and not self.lost

    @property
    def recovered(self) -> int:
        """HA guests placed on another node."""
        return len(self.recoveries) - len(self.lost)

    def summary(self) -> str:
        return _summary(self.overloaded, self.lost)


@dataclass(frozen=True, slots=True)
class LossVerdict:
    """One loss as the stored verdict keeps it: no guest's target and no load of a node that
    stays within its limits, so it grows with what goes wrong, not with nodes² (the full
    `NodeLoss` of one node is computed again when an admin asks for it, `lose`)."""

    node: str
    overloaded: tuple[NodeLoad, ...]
    lost: tuple[str, ...]
    recovered: int  # HA guests placed on another node
    down: tuple[str, ...]

    @property
    def survived(self) -> bool:
        return not self.overloaded and not self.lost

    def summary(self) -> str:
        return _summary(self.overloaded, self.lost)


def _summary(overloaded: tuple[NodeLoad, ...], lost: tuple[str, ...]) -> str:
    """What losing a node does, in the admin's words ("overloads node07 to 131 % memory")."""
    parts = [f"overloads {load.node} to {_percent(load)}" for load in overloaded]
    if len(lost) == 1:
        parts.append(f"leaves {lost[0]} with no node")
    elif lost:
        parts.append(f"leaves {len(lost)} guests with no node")
    return " and ".join(parts) or "is survived"


@dataclass(frozen=True, slots=True)
class N1Report[Loss: (NodeLoss, LossVerdict)]:
    losses: tuple[Loss, ...]

    @property
    def survives(self) -> bool:
        return all(loss.survived for loss in self.losses)

    @property
    def verdict(self) -> str:
        failing = sorted((loss for loss in self.losses if not loss.survived), key=_severity, reverse=True)
        if not self.losses:
            return "no node is online: nothing to lose"
        if not failing:
            return "survives the loss of any one node"
        worst = f"losing {failing[0].node} {failing[0].summary()}"
        others = [loss.node for loss in failing[1:]]
        if not others:
            return worst
        return worst + f"; losing {' or '.join(others) if len(others) <= 3 else f'{len(others)} other nodes'} fails too"


def n1(snapshot: Snapshot, limits: Limits = Limits()) -> N1Report[NodeLoss]:
    """The loss of each usable node in turn (name order)."""
    cluster = Cluster.of(snapshot)
    return N1Report(tuple(lose(snapshot, name, limits, cluster=cluster) for name in cluster.occupancy.names))


def survives(snapshot: Snapshot, limits: Limits = Limits()) -> bool:
    """`n1(...).survives`, stopping at the first loss that fails and without the per-node
    loads of the report: what capacity's bisection asks many times over."""
    cluster = Cluster.of(snapshot)
    return all(loss_survived(snapshot, name, cluster, limits) for name in cluster.occupancy.names)


def loss_survived(snapshot: Snapshot, failed: str, cluster: Cluster, limits: Limits) -> bool:
    """One loss of `survives`: every HA guest placed and no node it lands on over the rule.
    crs.n1_batch recovers the losses its batch does not cover through it."""
    recoveries, holdings, changed = _recover(snapshot, failed, cluster)
    if any(r.target is None for r in recoveries):
        return False
    return not any(refusal(cluster.nodes[node], holdings[node], limits) for node in changed)


def lose(
    snapshot: Snapshot,
    failed: str,
    limits: Limits = Limits(),
    rules: CompiledRules | None = None,
    *,
    cluster: Cluster | None = None,
) -> NodeLoss:
    """`failed` goes down now: where its HA guests go, and what the nodes left then hold."""
    cluster = cluster or Cluster.of(snapshot, rules)
    recoveries, holdings, changed = _recover(snapshot, failed, cluster)
    loads = tuple(_load(cluster.nodes[name], holdings[name], limits) for name in sorted(holdings))
    overloaded = tuple(load for load in loads if load.refusal and load.node in changed)
    lost = tuple(r.sid for r in recoveries if r.target is None)
    return NodeLoss(failed, recoveries, loads, overloaded, lost, _down(cluster, failed))


def verdicts(
    snapshot: Snapshot, limits: Limits = Limits(), survived: Mapping[str, bool] | None = None
) -> N1Report[LossVerdict]:
    """`n1` as the stored verdict keeps it (`LossVerdict`): the same verdict, survived and
    summary per loss. A loss `survived` already knows to be survived (crs.n1_batch decides
    them side by side) is not recovered again: every HA guest it strands is then placed."""
    cluster = Cluster.of(snapshot)
    known = survived or {}
    losses: list[LossVerdict] = []
    for name in cluster.occupancy.names:
        if known.get(name):
            stranded = _stranded(cluster, name)
            losses.append(LossVerdict(name, (), (), len(stranded), _down(cluster, name)))
            continue
        recoveries, holdings, changed = _recover(snapshot, name, cluster)
        loads = (_load(cluster.nodes[node], holdings[node], limits) for node in sorted(changed))
        lost = tuple(r.sid for r in recoveries if r.target is None)
        overloaded = tuple(load for load in loads if load.refusal)
        losses.append(LossVerdict(name, overloaded, lost, len(recoveries) - len(lost), _down(cluster, name)))
    return N1Report(tuple(losses))


def _stranded(cluster: Cluster, failed: str) -> list[Guest]:
    """The HA guests Proxmox recovers when `failed` goes down, in sid order."""
    return [g for g in cluster.on_node.get(failed, ()) if g.ha and g.state not in NOT_RECOVERED]


def _down(cluster: Cluster, failed: str) -> tuple[str, ...]:
    """Running guests not managed by HA: they stay down with the node."""
    return tuple(g.sid for g in cluster.on_node.get(failed, ()) if not g.ha and g.state == "started")


@dataclass(frozen=True, slots=True)
class Cluster:
    """What every loss starts from, computed once per snapshot: placement's occupancy, the
    configured sizes each node holds, the guests by node, and the compiled rules."""

    occupancy: Occupancy
    holdings: dict[str, Commitment]
    on_node: dict[str, list[Guest]]
    nodes: dict[str, Node]
    rules: CompiledRules

    @classmethod
    def of(cls, snapshot: Snapshot, rules: CompiledRules | None = None) -> Cluster:
        occupancy = Occupancy.of(snapshot)
        on_node: dict[str, list[Guest]] = {}
        for guest in sorted(snapshot.guests, key=lambda g: g.sid):
            on_node.setdefault(guest.node, []).append(guest)
        occupancy.exact = exact_fold(len(occupancy.names), sum(1 for g in snapshot.guests if g.ha))
        nodes = {n.name: n for n in snapshot.nodes}
        rules = rules if rules is not None else compile_rules(snapshot)
        return cls(occupancy, _holdings(snapshot), on_node, nodes, rules)


def exact_fold(nodes: int, recovering: int) -> bool:
    """The exact fold costs nodes² per placement: past the balancer's budget, the O(1) criteria.
    crs.n1_batch decides by the same rule, so both paths score alike."""
    return nodes**2 * recovering <= EXACT_TOPSIS_CELLS


def _recover(
    snapshot: Snapshot, failed: str, cluster: Cluster
) -> tuple[tuple[Recovery, ...], dict[str, Commitment], set[str]]:
    """Recover `failed`'s HA guests one by one, as Proxmox's manager does, on the cluster
    without that node: (recoveries, what each node left then holds, the nodes whose holdings
    changed). Only the failed node's guests are touched, so each loss costs its own guests."""
    base = cluster.occupancy
    keep = np.array([name != failed for name in base.names])
    names = [name for name in base.names if name != failed]
    changes: dict[str, Guest] = {}
    occupancy = replace(
        base,
        guests=ChainMap(changes, base.guests),
        names=names,
        cpu=base.cpu[keep],
        maxcpu=base.maxcpu[keep],
        mem=base.mem[keep],
        maxmem=base.maxmem[keep],
    )
    holdings = {name: cluster.holdings[name] for name in names}
    changed: set[str] = set()
    mode = snapshot.settings.mode
    usable = frozenset(names)
    stranded = _stranded(cluster, failed)
    for guest in stranded:
        _count(cluster.nodes, occupancy, holdings, changed, guest, -1.0, mode, usable)  # e.g. a migration's target
        changes[guest.sid] = replace(guest, state="recovery")  # counted on the failed node only: nowhere
    recoveries = []
    for guest in stranded:
        if not guest.recoverable:
            recoveries.append(Recovery(guest.sid, None, "not recoverable"))
            continue
        target = select_node(snapshot, guest.sid, "best-score", rules=cluster.rules, occupancy=occupancy)
        if target is None:
            recoveries.append(Recovery(guest.sid, None, "no node allowed"))
            continue
        recoveries.append(Recovery(guest.sid, target))
        state = "started" if guest.state != "stopped" else "request_stop"
        placed = replace(guest, node=target, state=state, running=False)
        changes[guest.sid] = placed
        _count(cluster.nodes, occupancy, holdings, changed, placed, 1.0, mode, usable)
    return tuple(recoveries), holdings, changed


def _count(
    nodes: dict[str, Node],
    occupancy: Occupancy,
    holdings: dict[str, Commitment],
    changed: set[str],
    guest: Guest,
    sign: float,
    mode: str,
    usable: frozenset[str],
) -> None:
    """Add (sign 1) or take away (sign −1) what `guest` counts on the usable nodes it counts
    on, in placement's demand and in configured sizes, as `node_stats` and `_holdings` sum them."""
    for name in counted_nodes(guest, usable):
        node = nodes[name]
        i = occupancy.index(name)
        cpu, mem = counted_demand(guest, node.cpus, mode, "placement", node.cpu_usage is not None)
        occupancy.cpu[i] += sign * cpu
        occupancy.mem[i] += sign * mem
        if guest.state != "request_stop":  # stopping: it holds nothing
            held = holdings[name]
            holdings[name] = Commitment(
                held.cores + sign * guest_cores(guest, node), held.memory_bytes + sign * guest.memory_bytes
            )
            changed.add(name)


def _holdings(snapshot: Snapshot) -> dict[str, Commitment]:
    """Usable node → configured sizes of the guests that run or will run there."""
    usable = frozenset(n.name for n in snapshot.nodes if n.usable)
    holding = (g for g in snapshot.guests if g.state != "request_stop")  # stopping: it holds nothing
    held = carried_by(holding, usable, usable)
    return {name: committed(snapshot.node(name), guests) for name, guests in held.items()}


def _load(node: Node, commitment: Commitment, limits: Limits) -> NodeLoad:
    memory_limit = node.memory_bytes - limits.memory_reserve_bytes
    cpu_limit = node.cpus * limits.cpu_overcommit
    return NodeLoad(
        node.name,
        commitment.cores,
        commitment.memory_bytes,
        commitment.cores / cpu_limit if cpu_limit > 0 else float("inf"),
        commitment.memory_bytes / memory_limit if memory_limit > 0 else float("inf"),
        refusal(node, commitment, limits),
    )


def _percent(load: NodeLoad) -> str:
    if load.refusal == "memory":
        return f"{load.memory * 100:.0f} % memory"
    return f"{load.cpu * 100:.0f} % CPU"


def _severity(loss: NodeLoss | LossVerdict) -> tuple[int, float]:
    """Lost guests first, then the worst overload."""
    worst = max((max(load.memory, load.cpu) for load in loss.overloaded), default=0.0)
    return len(loss.lost), worst
