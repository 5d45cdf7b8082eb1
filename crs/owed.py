"""The plans a round owes: evacuations of nodes in maintenance, failbacks to nodes back from
it, and rule fixes, whatever the imbalance, margin, hold or load floor.

A node the snapshot shows in maintenance gets an evacuation plan for the guests no
evacuation covers yet (crs.maintenance, Proxmox's placement); a node back gets its failback
plan; a guest whose node breaks a rule gets the move Proxmox's manager would make
(crs.violations). On a Proxmox cluster its HA manager moves its own HA guests: the plans hold
only the others, so two balancers never fight over one guest, and its own moves are listed
(`proxmox_own`) so an admin can follow each. Each plan is placed around the claims it must
leave room for (crs.claims): those of running moves and of approved moves it does not outrank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import claims
from .decision import Step
from .maintenance import evacuate, failback
from .model import Snapshot
from .planned import OWED_STATES, Ledger
from .precedence import EMPTYING
from .violations import violations


@dataclass(frozen=True, slots=True)
class Maintenance:
    """A node's open maintenance, as recorded when it entered."""

    node: str
    guests: tuple[str, ...]  # the started guests it held: the ones the failback brings back
    at_once: bool = False  # its moves run without waiting for approval
    seen: bool = True  # a snapshot collected after it entered (only such a one can say it left)
    left_here: bool = False  # left from the product's page: the trail already says so


@dataclass(frozen=True, slots=True)
class Owed:
    """What the owed part of a round decided."""

    opened: tuple[Maintenance, ...]  # nodes seen entering maintenance at the source (Proxmox's CLI)
    closed: tuple[Maintenance, ...]  # nodes back from maintenance
    proxmox_fixes: tuple[dict[str, object], ...]  # the moves Proxmox's HA manager makes itself


def theirs(snapshot: Snapshot, proxmox_ha: bool) -> frozenset[str]:
    """Guests Proxmox's own HA manager evacuates, fixes and brings back: not the product's."""
    return frozenset(g.sid for g in snapshot.guests if g.proxmox_ha) if proxmox_ha else frozenset()


def reconcile(
    snapshot: Snapshot,
    records: tuple[Maintenance, ...],
    ledger: Ledger,
    owe: Callable[[str, tuple[Step, ...], tuple[str, ...], bool], None],
    *,
    powering_down: frozenset[str] = frozenset(),
    at_once_nodes: frozenset[str] = frozenset(),
    proxmox_ha: bool = False,
) -> Owed:
    """Maintenance, then rule fixes: each owed plan through `owe(kind, steps, reasons, at_once)`.

    `powering_down`: nodes emptied for a power-down: their evacuation is a consolidation
    (ranked below balancing) and runs at once, also when seen entering maintenance at the
    source. `at_once_nodes`: nodes a rolling maintenance drains at once."""
    down = {n.name for n in snapshot.nodes if n.maintenance}
    recorded = {r.node for r in records}
    opened = tuple(
        Maintenance(node, _started_on(snapshot, node), node in at_once_nodes or node in powering_down)
        for node in sorted(down - recorded)
    )
    skip = theirs(snapshot, proxmox_ha)

    def around(kind: str) -> Snapshot:
        return claims.held(snapshot, claims.against(ledger.alive(claims.HOLDING), kind))

    closed = []
    for record in sorted(records, key=lambda r: r.node):
        if record.node in down or not record.seen:
            continue  # still in maintenance, or a snapshot from before it entered
        if not any(n.name == record.node and n.usable for n in snapshot.nodes):
            continue  # offline: it left maintenance by failing, nothing comes back to it
        closed.append(record)
        emptying = [m for m in ledger.alive(("suggested", "approved"), EMPTYING) if m.move.source == record.node]
        ledger.expire(emptying, f"{record.node} left maintenance before this move started")
        plan = failback(around("failback"), record.node, [sid for sid in record.guests if sid not in skip])
        owe("failback", plan.steps, plan.reasons, record.at_once)
    for record in sorted((*records, *opened), key=lambda r: r.node):
        if record.node not in down:
            continue
        covered = {m.move.leader for m in ledger.alive(OWED_STATES, EMPTYING) if m.move.source == record.node}
        kind = "consolidation" if record.node in powering_down else "evacuation"
        plan = evacuate(around(kind), record.node, skip=frozenset(covered | skip))
        owe(kind, plan.steps, plan.reasons, record.at_once)
    fixing = {m.move.leader for m in ledger.alive(OWED_STATES, ("rule-fix", "evacuation", "failback"))}
    fixes = violations(around("rule-fix"), skip=frozenset(fixing | skip))
    owe("rule-fix", fixes.steps, fixes.reasons, False)
    return Owed(opened, tuple(closed), proxmox_own(snapshot, skip))


def proxmox_own(snapshot: Snapshot, ha_guests: frozenset[str]) -> tuple[dict[str, object], ...]:
    """The moves Proxmox's HA manager makes itself, one per HA guest: those under way (kind
    "running"), then those its next round makes, in one sid-order walk as that manager places
    them: evacuations of nodes in maintenance and rule fixes. Empty on other clusters."""
    if not ha_guests:
        return ()
    moves: list[dict[str, object]] = [
        {
            "kind": "running",
            "guest": g.sid,
            "source": g.node,
            "target": g.target,
            "rules": [],
            "why": f"Proxmox's HA manager is moving it now ({g.state})",
        }
        for g in snapshot.guests
        if g.sid in ha_guests and g.moving and g.target is not None
    ]
    down = {n.name for n in snapshot.nodes if n.maintenance}
    others = frozenset(g.sid for g in snapshot.guests if g.sid not in ha_guests)
    walk = violations(snapshot, skip=others, evacuating=True)
    for step, why, rules in zip(walk.steps, walk.reasons, walk.rules, strict=True):
        move = step.move
        moves.append(
            {
                "kind": "evacuation" if move.source in down else "rule-fix",
                "guest": move.leader,
                "source": move.source,
                "target": move.target,
                "rules": list(rules),
                "why": why,
            }
        )
    return tuple(moves)


def _started_on(snapshot: Snapshot, node: str) -> tuple[str, ...]:
    return tuple(g.sid for g in snapshot.guests if g.node == node and g.state == "started")
