"""Which guests a balancing round may move, and where: bundles and candidate moves.

A bundle is a started guest plus its started positive-affinity partners: they move
together or not at all. Proxmox drops a bundle whose members are moving or split over
nodes, and (since the per-guest flag) one with any member excluded from rebalancing
(reference/proxmox-crs.md §4.4 step 4, §5.6). The product also drops one with a member
Proxmox would refuse to migrate for its lock (a backup, a snapshot: `Guest.locked`).
"""

from __future__ import annotations

from typing import NamedTuple

from .model import Guards, Guest, Snapshot
from .rules import CompiledRules, node_affinity, resource_affinity
from .usage import demand, usable_nodes


class Bundle(NamedTuple):  # immutable, and made 2× faster than a frozen dataclass (one per guest)
    leader: str  # alphabetically first member, the name the move is known by
    guests: tuple[str, ...]  # sorted, leader first
    node: str
    cpu: float  # what moves with it, in the mode's units (cores / bytes)
    mem: float
    targets: tuple[str, ...] | None  # allowed targets in name order; None = every other usable node


def movable_bundles(
    snapshot: Snapshot, rules: CompiledRules, mode: str, guards: Guards = Guards(), *, locks: bool = True
) -> list[Bundle]:
    """Active stationary bundles with at least one allowed target, by leader name. `locks=False`
    keeps bundles with a locked member: a decided move judged again waits for the lock, while
    a plan never proposes one."""
    guests = {g.sid: g for g in snapshot.guests}
    online = usable_nodes(snapshot)
    online_set = set(online)
    barred_nodes: dict[str, set[str]] = {}
    for sid, node in guards.barred:
        barred_nodes.setdefault(sid, set()).add(node)
    never_ct = snapshot.settings.containers == "never"
    nodes = {n.name: n for n in snapshot.nodes}
    out: dict[str, Bundle] = {}
    for guest in sorted(snapshot.guests, key=lambda g: g.sid):
        if not guest.ha or guest.state != "started":
            continue
        members = [guest]
        for sid in sorted(rules.positive.get(guest.sid, ())):
            partner = guests.get(sid)
            if partner is None or not partner.ha:
                continue
            if partner.moving:
                members = []  # a partner in motion: the whole bundle waits
                break
            if partner.state == "started":
                members.append(partner)
        if not members or not _may_move_together(members, guards.in_cooldown, never_ct, locks):
            continue
        if len(members) > 1:
            members.sort(key=lambda g: g.sid)
        leader = members[0]
        if leader.sid in out or leader.node not in online_set:
            continue
        targets = _targets(rules, leader.sid, leader.node, guests, online)
        barred = set().union(*(barred_nodes.get(m.sid, ()) for m in members)) if barred_nodes else ()
        if barred:
            targets = tuple(
                n for n in (targets if targets is not None else online) if n not in barred and n != leader.node
            )
        if any(m.allowed_nodes is not None or m.requires for m in members):
            targets = tuple(
                n
                for n in (targets if targets is not None else online)
                if n != leader.node and all(m.may_run_on(nodes[n]) for m in members)
            )
        if targets == ():
            continue
        cpu = mem = 0.0
        for member in members:
            c, m = demand(member, mode)
            cpu += c
            mem += m
        out[leader.sid] = Bundle(leader.sid, tuple(m.sid for m in members), leader.node, cpu, mem, targets)
    return [out[k] for k in sorted(out)]


def _may_move_together(members: list[Guest], in_cooldown: frozenset[str], never_ct: bool, locks: bool) -> bool:
    """All on one node, none excluded from rebalancing, in cooldown or (with `locks`) locked, and
    no container when the admin does not allow a container's restart (one pass: this runs for
    every guest)."""
    node = members[0].node
    for m in members:
        if m.node != node or not m.auto_rebalance or m.sid in in_cooldown or (never_ct and m.kind == "ct"):
            return False
        if locks and m.locked:
            return False
    return True


def _targets(
    rules: CompiledRules, sid: str, node: str, guests: dict[str, Guest], online: list[str]
) -> tuple[str, ...] | None:
    """The leader's preferred nodes, minus its negative partners' nodes and its own."""
    if sid not in rules.node_affinity and sid not in rules.negative:
        return None if len(online) > 1 else ()  # unconstrained: spelled out only when needed
    _, preferred = node_affinity(rules, sid, online)
    _, separate = resource_affinity(rules, sid, guests, online)
    return tuple(sorted(preferred - separate - {node}))
