"""Rule violations in a round: corrective moves with priority 1, ahead of balancing.

A guest whose node breaks a rule gets the move Proxmox's manager would make
(crs.violations), named by the rule, whatever the imbalance, margin, hold or load floor.
On a Proxmox cluster its HA manager fixes its HA guests itself, within seconds: the product
shows those (`proxmox_fixes`, in the round's explanation) and plans only the others, so
two balancers never fight over one guest.
"""

import crs.model
import crs.violations

from . import plans
from .maintenance import OWED_STATES, proxmox_moves
from .models import Cluster


def reconcile(cluster: Cluster, snapshot: crs.model.Snapshot) -> tuple[list[int], list[int], list[str]]:
    """(migrations changed, migrations approved, what Proxmox is left to fix, in words)."""
    theirs = proxmox_moves(cluster, snapshot)
    fixing = set(
        cluster.migrations.filter(kind__in=["rule-fix", "evacuation", "failback"], state__in=OWED_STATES).values_list(
            "leader", flat=True
        )
    )
    fixes = crs.violations.violations(snapshot, skip=frozenset(fixing | theirs))
    changed, approved = plans.owe(cluster, snapshot, fixes.steps, fixes.reasons, "rule-fix")
    proxmox = crs.violations.violations(snapshot, skip=frozenset(g.sid for g in snapshot.guests if g.sid not in theirs))
    return changed, approved, [f"Proxmox's HA manager moves it: {why}" for why in proxmox.reasons]
