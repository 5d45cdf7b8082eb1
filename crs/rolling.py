"""The order of a rolling maintenance: which nodes to take down, and which together (hroller).

Nodes go fewest and smallest guests first: the first evacuations are quick and show early
whether the cluster copes. With a group size above one, nodes share a step only when none
of them is where another's guests would be recovered, so a step never evacuates a node
onto a node that is about to go down with it (Ganeti's hroller grouping).
"""

from __future__ import annotations

from dataclasses import replace

from . import maintenance, n1_batch
from .balancer import apply_move
from .fits import Limits
from .model import Snapshot
from .placement import select_node


def order(snapshot: Snapshot, nodes: tuple[str, ...] | None = None) -> list[str]:
    """`nodes` (default: every usable node) by (guest count, configured guest memory, name)."""
    chosen = nodes if nodes is not None else tuple(n.name for n in snapshot.nodes if n.usable)
    weight = {name: (0, 0.0) for name in chosen}
    for g in snapshot.guests:
        if g.node in weight:
            count, memory = weight[g.node]
            weight[g.node] = (count + 1, memory + g.memory_bytes)
    return sorted(chosen, key=lambda name: (*weight[name], name))


def recovery_targets(snapshot: Snapshot, node: str) -> set[str]:
    """Where `node`'s guests would go if it failed now (Proxmox's recovery placement)."""
    failed = replace(snapshot, nodes=tuple(replace(n, online=False) if n.name == node else n for n in snapshot.nodes))
    targets = set()
    for guest in snapshot.guests:
        if guest.node == node:
            target = select_node(failed, guest.sid, "best-score")
            if target is not None:
                targets.add(target)
    return targets


def groups(snapshot: Snapshot, nodes: tuple[str, ...] | None = None, size: int = 1) -> list[list[str]]:
    """The steps of the rolling maintenance, in order; each step at most `size` nodes, none of
    them a recovery target of another in the same step."""
    pending = order(snapshot, nodes)
    targets = {name: recovery_targets(snapshot, name) for name in pending} if size > 1 else {}
    steps: list[list[str]] = []
    while pending:
        step = [pending.pop(0)]
        for name in list(pending):
            if len(step) >= size:
                break
            if all(name not in targets[s] and s not in targets[name] for s in step):
                step.append(name)
                pending.remove(name)
        steps.append(step)
    return steps


def breaks_n1(snapshot: Snapshot, nodes: list[str], limits: Limits = Limits()) -> str:
    """Why taking `nodes` down, emptied as their evacuations leave them (Proxmox's placement),
    breaks N+1: it holds now and would not, or it fails now and more nodes' losses would fail
    then ("" = neither). The question a rolling maintenance asks before each step. The verdict
    now is needed only when the one after fails, so a step that keeps N+1 costs one verdict."""
    after = snapshot
    for node in nodes:
        plan = maintenance.evacuate(after, node)
        after = maintenance.in_maintenance(after, node)
        for step in plan.steps:
            after = apply_move(after, step.move)
    report = n1_batch.verdict(after, limits)  # the same verdict as crs.n1.n1, a loss at a time only where it fails
    if report.survives:
        return ""
    failing = sum(not loss.survived for loss in report.losses)
    if failing <= sum(not loss.survived for loss in n1_batch.verdict(snapshot, limits).losses):
        return ""
    return f"with {', '.join(nodes)} in maintenance, N+1 fails: {report.verdict}"
