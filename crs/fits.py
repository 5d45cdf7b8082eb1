"""What fits on a node: the one capacity rule of the product's planner, N+1 and capacity.

Proxmox scores nodes and never refuses one for being full; an admin's planner must not
propose a move that overfills a node, so the product checks configured sizes (what a guest
may use, not what it uses now), as Ganeti's htools do: configured memory within the node's
RAM less a per-node reserve, configured cores within its CPUs times an overcommit ratio
(Ganeti's `vcpu_ratio`). The `proxmox` preset does not apply it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .model import Guest, Node

Refusal = Literal["memory", "cpu"]


@dataclass(frozen=True, slots=True)
class Limits:
    memory_reserve_bytes: float = 0.0  # kept free on every node (host, page cache, ZFS ARC)
    cpu_overcommit: float = 4.0  # configured cores per CPU thread


@dataclass(frozen=True, slots=True)
class Commitment:
    """What a node's guests are configured for; a guest with 0 cores may use all of the node's."""

    cores: float = 0.0
    memory_bytes: float = 0.0

    def plus(self, guest: Guest, node: Node) -> Commitment:
        return Commitment(self.cores + guest_cores(guest, node), self.memory_bytes + guest.memory_bytes)


def guest_cores(guest: Guest, node: Node) -> float:
    return guest.cores if guest.cores > 0 else node.cpus


def committed(node: Node, guests: Iterable[Guest]) -> Commitment:
    total = Commitment()
    for guest in guests:
        total = total.plus(guest, node)
    return total


def refusal(node: Node, commitment: Commitment, limits: Limits) -> Refusal | None:
    """Why `node` cannot carry `commitment`, memory first (it cannot be overcommitted); None = fits."""
    if commitment.memory_bytes > node.memory_bytes - limits.memory_reserve_bytes:
        return "memory"
    if commitment.cores > node.cpus * limits.cpu_overcommit:
        return "cpu"
    return None


def room(node: Node, commitment: Commitment, limits: Limits) -> Commitment:
    """What `node`, already carrying `commitment`, may still take (negative: already over).
    A guest fits where its memory and its cores are both within it; planners compare whole
    arrays of candidates against it at once."""
    return Commitment(
        node.cpus * limits.cpu_overcommit - commitment.cores,
        node.memory_bytes - limits.memory_reserve_bytes - commitment.memory_bytes,
    )


def fits(node: Node, commitment: Commitment, guest: Guest, limits: Limits) -> Refusal | None:
    """Why `node`, already carrying `commitment`, cannot take `guest` as well; None = it can."""
    return refusal(node, commitment.plus(guest, node), limits)
