"""Maintenance: the evacuation of a node an admin takes down, and the way back.

Proxmox's manager takes a node in maintenance out of the online set; every started
service on it remembers the node (`maintenance_node`) and is placed with preference
'none', which cannot keep it there, so the best score among the nodes its rules allow
wins, service by service in sid order, each counted before the next (§5.4: that is how
test-crs-static3/4/5 spread). Stopped guests stay. When the node is back, a guest that
remembers it returns if the node survives its rules' filters (§5.3 step 6); one placed
elsewhere meanwhile does not.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .decision import Step
from .mandatory import in_turn, loads, placed
from .model import Snapshot
from .rules import compile_rules


@dataclass(frozen=True, slots=True)
class Plan:
    """Each guest → its target in the order they go, why, and the node loads after them all."""

    node: str
    steps: tuple[Step, ...]
    reasons: tuple[str, ...]
    stuck: tuple[str, ...]  # guests no node may take (strict rules, negative partners everywhere)
    loads_after: dict[str, float]


def in_maintenance(snapshot: Snapshot, node: str) -> Snapshot:
    """The snapshot with `node` in maintenance: it carries nothing and receives nothing."""
    return snapshot.with_nodes(tuple(replace(n, maintenance=True) if n.name == node else n for n in snapshot.nodes))


def evacuate(snapshot: Snapshot, node: str, skip: frozenset[str] = frozenset()) -> Plan:
    """Where the started guests of `node` go when it enters maintenance (Proxmox's placement).

    `skip`: guests someone else evacuates (on a Proxmox cluster its HA manager moves its HA
    guests; the product plans only the others, which Proxmox leaves in place)."""
    emptied = in_maintenance(snapshot, node)
    rules = compile_rules(emptied)
    leaving = [g.sid for g in emptied.guests if g.node == node and g.state == "started" and g.sid not in skip]
    stuck: list[str] = []

    def decide(sid: str, current: Snapshot) -> tuple[str, str] | None:
        target = placed(current, sid, rules)
        if target is None:
            stuck.append(sid)
            return None
        return target, f"{node} enters maintenance: Proxmox's placement sends {sid} to {target}"

    steps, reasons, after = in_turn(emptied, leaving, decide)
    return Plan(node, steps, reasons, tuple(stuck), loads(after))


def failback(snapshot: Snapshot, node: str, evacuated: tuple[str, ...] | list[str]) -> Plan:
    """The guests evacuated from `node` that go back now that it is out of maintenance:
    those still started elsewhere for which the node is still the place their rules pick."""
    rules = compile_rules(snapshot)
    present = {g.sid: g for g in snapshot.guests}
    back = [
        sid for sid in evacuated if sid in present and present[sid].state == "started" and present[sid].node != node
    ]

    def decide(sid: str, current: Snapshot) -> tuple[str, str] | None:
        if placed(current, sid, rules, maintenance_node=node) != node:
            return None
        return node, f"{node} is back from maintenance: {sid} returns to it"

    steps, reasons, after = in_turn(snapshot, back, decide)
    return Plan(node, steps, reasons, (), loads(after))
