"""Moves the cluster owes, not moves that improve it: evacuations and rule fixes.

Proxmox's manager makes them service by service in sid order with `select_service_node`,
counting each decision before the next, and repeats while anything changed
(reference/proxmox-crs.md §5.3, §5.4, §6.1a). `in_turn` is that walk, shared by
`crs.maintenance` and `crs.violations`, and it gives Proxmox's answers (the issue asks the
product's rule enforcement for the same answers as Proxmox's manager, in every preset): a
decided guest is migrating for the rest of the walk, so it counts on its source and its
target, in the usage and for its negative partners, and at its target only for its positive
partners (§1.2, §5.2). A negative partner left behind on the source therefore moves too, as
on Proxmox, although once the first move settles it would be alone there; `stale_reason`
re-checks each move right before it starts, so one that is no longer owed by then expires
instead. They ignore margin, hold, threshold, load floor and the guards: a rule or a
maintenance does not wait for a better moment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from .decision import Move, Step
from .imbalance import cluster_imbalance, relative_gain
from .model import Guest, Snapshot
from .placement import select_node
from .rules import CompiledRules, compile_rules, node_affinity, resource_affinity
from .usage import node_loads

# sid, the snapshot with the earlier decisions counted → (target, why) or None (it stays).
Decide = Callable[[str, Snapshot], tuple[str, str] | None]


def in_turn(
    snapshot: Snapshot, sids: Iterable[str], decide: Decide
) -> tuple[tuple[Step, ...], tuple[str, ...], Snapshot]:
    """(steps, their reasons, the snapshot after them): each guest in sid order, decided on
    the snapshot where the earlier ones are migrating to their targets, as Proxmox's walk
    counts them. The figures (each step's imbalance, the snapshot returned) are of the
    settled cluster, every decided guest on its target."""
    walking = settled = snapshot
    before = cluster_imbalance(settled)
    steps: list[Step] = []
    reasons: list[str] = []
    for sid in sorted(sids):
        decided = decide(sid, walking)
        if decided is None:
            continue
        target, why = decided
        guest = walking.guest(sid)
        motion = "migrate" if sid.startswith("vm:") else "relocate"  # a container is relocated (restarted)
        walking = _with(walking, replace(guest, state=motion, target=target))
        settled = _with(settled, replace(guest, node=target))
        after = cluster_imbalance(settled)
        move = Move(sid, (sid,), guest.node, target, after, relative_gain(before, after))
        steps.append(Step(move, before, after, move.relative_gain, (), len(steps) - 1 if steps else None))
        reasons.append(why)
        before = after
    return tuple(steps), tuple(reasons), settled


def _with(snapshot: Snapshot, guest: Guest) -> Snapshot:
    """`snapshot` with `guest` in place of the guest of its sid."""
    return replace(snapshot, guests=tuple(guest if g.sid == guest.sid else g for g in snapshot.guests))


def placed(snapshot: Snapshot, sid: str, rules: CompiledRules, maintenance_node: str | None = None) -> str | None:
    """Where Proxmox's manager keeps a started guest this round (`select_service_node`, 'none')."""
    return select_node(snapshot, sid, "none", rules=rules, maintenance_node=maintenance_node)


def stale_reason(snapshot: Snapshot, move: Move, kind: str) -> str | None:
    """Why an evacuation or rule fix must not start on this (fresh) snapshot; None = it may.

    Same guest on the same source, the target usable and allowed by the rules and the
    guest's own limits, and the reason still there: its source still in maintenance (an
    evacuation; a return needs its node back), or its node still breaking a rule (a fix).
    """
    guests = {g.sid: g for g in snapshot.guests}
    guest = guests.get(move.leader)
    if guest is None:
        return f"{move.leader} no longer exists"
    if guest.node != move.source or guest.state != "started":
        return f"{move.leader} is no longer running on {move.source} (now {guest.state} on {guest.node})"
    nodes = {n.name: n for n in snapshot.nodes}
    if move.target not in nodes or not nodes[move.target].usable:
        return f"{move.target} is offline, in maintenance or gone"
    rules = compile_rules(snapshot)
    online = [n.name for n in snapshot.nodes if n.usable]
    allowed, _ = node_affinity(rules, move.leader, online)
    _, separate = resource_affinity(rules, move.leader, guests, online)
    if move.target not in allowed or move.target in separate or not guest.may_run_on(nodes[move.target]):
        return f"the rules no longer allow {move.leader} on {move.target}"
    if kind in ("evacuation", "consolidation") and nodes.get(move.source) is not None and nodes[move.source].usable:
        return f"{move.source} is no longer in maintenance"
    if kind == "failback" and placed(snapshot, move.leader, rules, move.target) != move.target:
        return f"{move.target} is no longer where {move.leader} belongs"
    if kind == "rule-fix" and placed(snapshot, move.leader, rules) == move.source:
        return f"{move.leader} no longer breaks a rule on {move.source}"
    return None


def loads(snapshot: Snapshot) -> dict[str, float]:
    """Node → load after a plan, under the snapshot's mode."""
    return node_loads(snapshot, snapshot.settings.mode)
