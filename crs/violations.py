"""Rule violations: guests whose node breaks a rule, and the move Proxmox's manager makes.

A guest lands where a rule forbids it after a migration outside the product, a rule
change or a node's return. Proxmox re-places every started service each round with
`select_service_node(…, 'none')`: it stays unless its node breaks its node affinity
(outside the allowed nodes, or below the best priority class online: failback), sits
with a negative partner, or away from where its positive partners are; then the best
allowed node wins (§5.3, §6.1a). The fix is that move, with the rule named, so an admin
reads why a rule outranks balancing.
"""

from __future__ import annotations

from dataclasses import dataclass

from .decision import Step
from .mandatory import in_turn, placed
from .model import ResourceAffinityRule, Snapshot
from .rules import CompiledRules, compile_rules, node_affinity, resource_affinity


@dataclass(frozen=True, slots=True)
class Fixes:
    steps: tuple[Step, ...]
    reasons: tuple[str, ...]  # per step: the rule broken, in the admin's words
    unfixable: tuple[str, ...]  # guests that break a rule (or must leave a node) with no node to go to
    rules: tuple[tuple[str, ...], ...] = ()  # per step: the ids of the rules broken (none: inferred ones)


@dataclass(frozen=True, slots=True)
class Breach:
    """The rule(s) a guest's node breaks: their ids, so a list can name them, and the words."""

    rules: tuple[str, ...]
    why: str


def violations(snapshot: Snapshot, skip: frozenset[str] = frozenset(), evacuating: bool = False) -> Fixes:
    """The corrective moves of every started guest on a usable node whose node breaks a rule.

    `skip`: guests whose rules someone else enforces (a Proxmox cluster's HA manager fixes
    its HA guests itself: the product shows them, it does not fight over them).
    `evacuating`: the started guests on nodes in maintenance leave them in the same walk,
    as in Proxmox's manager round, which re-places every service in one sid-order walk; the
    product plans its evacuations per node instead (crs.maintenance), for the record of each."""
    rules = compile_rules(snapshot)
    usable = {n.name for n in snapshot.nodes if n.usable}
    down = {n.name for n in snapshot.nodes if n.maintenance} if evacuating else set()
    ruled = set(rules.node_affinity) | set(rules.positive) | set(rules.negative)
    candidates = [
        g.sid
        for g in snapshot.guests
        if g.state == "started" and g.sid not in skip and (g.node in down or (g.sid in ruled and g.node in usable))
    ]
    unfixable: list[str] = []
    named: dict[str, tuple[str, ...]] = {}

    def decide(sid: str, current: Snapshot) -> tuple[str, str] | None:
        node = current.guest(sid).node
        target = placed(current, sid, rules)
        if node in down:
            if target is None:
                unfixable.append(sid)
                return None
            named[sid] = ()
            return target, f"{node} is in maintenance: Proxmox's placement sends {sid} to {target}"
        if target == node:
            return None
        breach = broken(current, rules, sid)
        if target is None:
            if breach is not None:
                unfixable.append(sid)
            return None
        named[sid] = breach.rules if breach else ()
        return target, breach.why if breach else f"the rules of {sid} place it on {target}, not {node}"

    steps, reasons, _ = in_turn(snapshot, candidates, decide)
    return Fixes(steps, reasons, tuple(unfixable), tuple(named[s.move.leader] for s in steps))


def broken(snapshot: Snapshot, rules: CompiledRules, sid: str) -> Breach | None:
    """The rule `sid`'s node breaks, named; None when its node keeps every rule."""
    guest = snapshot.guest(sid)
    online = [n.name for n in snapshot.nodes if n.usable]
    guests = {g.sid: g for g in snapshot.guests}
    node_rule = rules.node_affinity.get(sid)
    if node_rule is not None:
        allowed, preferred = node_affinity(rules, sid, online)
        if guest.node not in allowed:
            why = f"node affinity rule '{node_rule.id}' (strict) does not allow {sid} on {guest.node}"
            return Breach((node_rule.id,), why)
        if guest.node not in preferred:
            best = ", ".join(sorted(preferred))
            why = f"node affinity rule '{node_rule.id}' prefers {best} for {sid} over {guest.node}"
            return Breach((node_rule.id,), why)
    together, separate = resource_affinity(rules, sid, guests, online)
    if guest.node in separate:
        partners = sorted(p for p in rules.negative.get(sid, ()) if p in guests and guests[p].node == guest.node)
        ids, rule = _named(snapshot, sid, partners, "negative")
        why = f"resource affinity rule {rule} keeps {sid} apart from {', '.join(partners)}, also on {guest.node}"
        return Breach(ids, why)
    if together and together.get(guest.node, 0) < max(together.values(), default=0):
        partners = sorted(rules.positive.get(sid, ()))
        ids, rule = _named(snapshot, sid, partners, "positive")
        why = f"resource affinity rule {rule} keeps {sid} together with {', '.join(partners)}, not on {guest.node}"
        return Breach(ids, why)
    return None


def _named(snapshot: Snapshot, sid: str, partners: list[str], affinity: str) -> tuple[tuple[str, ...], str]:
    """(ids, words) of the written rule(s) joining `sid` to a partner; inferred ones (Proxmox's
    implicit negative rules, merged positive groups) have no id and are said to be so."""
    ids = tuple(
        sorted(
            r.id
            for r in snapshot.rules
            if isinstance(r, ResourceAffinityRule)
            and r.affinity == affinity
            and sid in r.resources
            and set(partners) & set(r.resources)
        )
    )
    if ids:
        return ids, ", ".join(f"'{i}'" for i in ids)
    return (), "(inferred from the positive and negative rules)"
