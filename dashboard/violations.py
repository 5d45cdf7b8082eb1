"""Rule violations in a round: corrective moves with priority 1, ahead of balancing.

A guest whose node breaks a rule gets the move Proxmox's manager would make
(crs.violations), named by the rule, whatever the imbalance, margin, hold or load floor.
On a Proxmox cluster its HA manager fixes its HA guests itself, within seconds, and empties
its nodes in maintenance of them: the product plans only the others, so two balancers never
fight over one guest, and lists Proxmox's own moves one by one (`proxmox_own`: guest, from,
to, why and which rule), in the round's explanation (`proxmox_fixes`), the API and the
maintenance panel, so an admin can follow each.
"""

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
    """The moves Proxmox's HA manager makes itself, one per HA guest: those under way in
    `snapshot` (kind "running"), then those its next round makes, in one sid-order walk as
    that manager places them (crs.violations): evacuations of nodes in maintenance and rule
    fixes. Empty on other clusters."""
    if snapshot is None:
        return []
    theirs = proxmox_moves(cluster, snapshot)
    if not theirs:
        return []
    moves = [
        {
            "kind": "running",
            "guest": g.sid,
            "source": g.node,
            "target": g.target,
            "rules": [],
            "why": f"Proxmox's HA manager is moving it now ({g.state})",
        }
        for g in snapshot.guests
        if g.sid in theirs and g.moving and g.target is not None
    ]
    down = {n.name for n in snapshot.nodes if n.maintenance}
    others = frozenset(g.sid for g in snapshot.guests if g.sid not in theirs)
    walk = crs.violations.violations(snapshot, skip=others, evacuating=True)
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
    return moves
