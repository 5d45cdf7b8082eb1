"""Rule violations in a round: corrective moves with priority 1, ahead of balancing.

A guest whose node breaks a rule gets the move Proxmox's manager would make
(crs.violations), named by the rule, whatever the imbalance, margin, hold or load floor.
On a Proxmox cluster its HA manager fixes its HA guests itself, within seconds, and empties
its nodes in maintenance of them: the product plans only the others, so two balancers never
fight over one guest, and lists Proxmox's own moves one by one (`proxmox_own`: guest, from,
to, why and which rule), in the round's explanation (`proxmox_fixes`), the API and the
maintenance panel, so an admin can follow each.
"""

import crs.maintenance
import crs.model
import crs.violations

from . import plans
from .maintenance import OWED_STATES, proxmox_moves
from .models import Cluster


def reconcile(cluster: Cluster, snapshot: crs.model.Snapshot) -> tuple[list[int], list[int], list[dict]]:
    """(migrations changed, migrations approved, the moves Proxmox's HA manager makes itself)."""
    theirs = proxmox_moves(cluster, snapshot)
    fixing = set(
        cluster.migrations.filter(kind__in=["rule-fix", "evacuation", "failback"], state__in=OWED_STATES).values_list(
            "leader", flat=True
        )
    )
    fixes = crs.violations.violations(snapshot, skip=frozenset(fixing | theirs))
    changed, approved = plans.owe(cluster, snapshot, fixes.steps, fixes.reasons, "rule-fix")
    return changed, approved, proxmox_own(cluster, snapshot)


def proxmox_own(cluster: Cluster, snapshot: crs.model.Snapshot | None) -> list[dict]:
    """The moves Proxmox's HA manager makes itself on `snapshot`, one per HA guest: its
    evacuations of nodes in maintenance, then its rule fixes, each placed as that manager
    places it (crs.maintenance, crs.violations). Empty on other clusters."""
    if snapshot is None:
        return []
    theirs = proxmox_moves(cluster, snapshot)
    if not theirs:
        return []
    others = frozenset(g.sid for g in snapshot.guests if g.sid not in theirs)
    moves = []
    for node in sorted(n.name for n in snapshot.nodes if n.maintenance):
        plan = crs.maintenance.evacuate(snapshot, node, skip=others)
        moves += [_listed("evacuation", step, why, ()) for step, why in zip(plan.steps, plan.reasons, strict=True)]
    fixes = crs.violations.violations(snapshot, skip=others)
    moves += [
        _listed("rule-fix", step, why, rules)
        for step, why, rules in zip(fixes.steps, fixes.reasons, fixes.rules, strict=True)
    ]
    return moves


def _listed(kind: str, step, why: str, rules: tuple[str, ...]) -> dict:
    move = step.move
    return {
        "kind": kind,
        "guest": move.leader,
        "source": move.source,
        "target": move.target,
        "rules": list(rules),
        "why": why,
    }
