"""How much each node carries, in the three scheduler modes.

`basic` counts guests, `static` sums configured sizes, `dynamic` uses measured usage.
Which guests count on which node follows Proxmox's "used nodes" rule
(reference/proxmox-crs.md §1.2): a moving guest loads its source *and* its target, a
guest with no CPU limit counts as all of its node's CPUs, unmanaged running guests
still count as load, and nodes that are offline or in maintenance carry nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np

from .model import STATES_ON_CURRENT_NODE, STATES_ON_TARGET_NODE, Guest, Snapshot

Purpose = Literal["balance", "placement"]


@dataclass(frozen=True, slots=True)
class NodeStats:
    """One usable node's demand against its capacity."""

    name: str
    cpu: float  # cores used (dynamic) or reserved (static); guest count in basic
    maxcpu: float
    mem: float  # bytes
    maxmem: float

    @property
    def cpu_load(self) -> float:
        return self.cpu / self.maxcpu

    @property
    def mem_load(self) -> float:
        return self.mem / self.maxmem

    @property
    def load(self) -> float:
        return load(self.cpu, self.maxcpu, self.mem, self.maxmem)


@overload
def load(cpu: float, maxcpu: float, mem: float, maxmem: float) -> float: ...
@overload
def load(cpu: np.ndarray, maxcpu: np.ndarray, mem: np.ndarray, maxmem: np.ndarray) -> np.ndarray: ...
def load(cpu: Any, maxcpu: Any, mem: Any, maxmem: Any) -> Any:  # floats or NumPy arrays alike
    """Proxmox's node load: the plain mean of CPU and memory utilisation, in this operation
    order everywhere (the scalar round and the vectorized scoring agree bit for bit)."""
    return (cpu / maxcpu + mem / maxmem) / 2.0


def usable_nodes(snapshot: Snapshot) -> list[str]:
    """Names of the nodes that carry load and may receive guests, in name order."""
    return sorted(n.name for n in snapshot.nodes if n.usable)


def counted_nodes(guest: Guest, usable: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The usable nodes on which `guest` counts: current node and/or move target."""
    out: list[str] = []
    if guest.state in STATES_ON_CURRENT_NODE and guest.node in usable:
        out.append(guest.node)
    if guest.state in STATES_ON_TARGET_NODE and guest.target in usable and guest.target not in out:
        out.append(guest.target)  # type: ignore[arg-type]
    return tuple(out)


def carried_by(
    guests: Iterable[Guest], nodes: Iterable[str], usable: set[str] | frozenset[str]
) -> dict[str, list[Guest]]:
    """Each of `nodes` → the guests that count on it (`counted_nodes`), in one pass over the
    guests: a scan per node is nodes × guests, 1000 × 20 000 on a large round. The capacity
    rule's checks (planner, N+1, the reason a round names a full cluster) all start here."""
    carried: dict[str, list[Guest]] = {name: [] for name in nodes}
    for guest in guests:
        if guest.node in carried or guest.target in carried:  # the only nodes it may count on
            for name in counted_nodes(guest, usable):
                if name in carried:
                    carried[name].append(guest)
    return carried


def is_starting(guest: Guest) -> bool:
    """Placed but not yet confirmed running: it holds its maxima, not measured usage."""
    return guest.state == "request_start_balance" or (guest.state == "started" and not guest.running)


def reserved_cpu(guest: Guest, node_cpus: float) -> float:
    """A guest's configured CPUs on a node; 0 means unlimited, i.e. the whole node."""
    return guest.cores if guest.cores > 0 else node_cpus


def node_stats(snapshot: Snapshot, mode: str, purpose: Purpose = "balance") -> list[NodeStats]:
    """Per usable node (name order): demand and capacity under `mode`.

    For `dynamic` placement, guests that are starting count with their maxima on top of
    the measured usage, so guests placed in the same round are not all sent to the same
    node (Proxmox's "StartingAsStarted" aggregation); for balancing they do not count.
    """
    names = usable_nodes(snapshot)
    usable = frozenset(names)
    capacity = {n.name: n for n in snapshot.nodes}
    cpu = dict.fromkeys(names, 0.0)
    mem = dict.fromkeys(names, 0.0)
    measured_given = {n.name for n in snapshot.nodes if n.cpu_usage is not None}
    if mode == "dynamic":
        for name in measured_given & usable:
            cpu[name] = capacity[name].cpu_usage or 0.0
            mem[name] = capacity[name].mem_usage_bytes or 0.0
    for guest in sorted(snapshot.guests, key=lambda g: g.sid):
        for name in counted_nodes(guest, usable):
            add_cpu, add_mem = counted_demand(guest, capacity[name].cpus, mode, purpose, name in measured_given)
            cpu[name] += add_cpu
            mem[name] += add_mem
    return [NodeStats(n, cpu[n], capacity[n].cpus, mem[n], capacity[n].memory_bytes) for n in names]


def counted_demand(
    guest: Guest, node_cpus: float, mode: str, purpose: Purpose, node_measured: bool
) -> tuple[float, float]:
    """What `guest` adds to one node it counts on (cpu, mem), as `node_stats` sums it; placement
    what-ifs (N+1) add and take away the same amounts instead of summing the cluster again."""
    if mode == "basic":
        return 1.0, 1.0
    if mode == "static":
        return reserved_cpu(guest, node_cpus), guest.memory_bytes
    if is_starting(guest):
        return (reserved_cpu(guest, node_cpus), guest.memory_bytes) if purpose == "placement" else (0.0, 0.0)
    if node_measured:
        return 0.0, 0.0  # the node's own measurement already holds it
    return guest.cpu_usage, guest.mem_usage_bytes


def demand(guest: Guest, mode: str) -> tuple[float, float]:
    """What moving `guest` takes off its source and puts on its target (cpu, mem).

    In static mode an unlimited guest (cores 0) moves 0 CPU here, although it counts as
    the whole node in the accumulation: that is what Proxmox does, kept for exactness.
    """
    if mode == "static":
        return guest.cores, guest.memory_bytes
    if mode == "basic":
        return 1.0, 1.0
    return guest.cpu_usage, guest.mem_usage_bytes


def node_loads(snapshot: Snapshot, mode: str) -> dict[str, float]:
    """Node name → load (mean of CPU and memory utilisation; 1.0 = full)."""
    return {s.name: s.load for s in node_stats(snapshot, mode)}
