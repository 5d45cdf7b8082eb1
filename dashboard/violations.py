"""Rule violations on a Proxmox cluster: the moves its own HA manager makes.

The round owes corrective moves for the guests it plans itself (crs.owed, decided by
crs.round); on a Proxmox cluster the HA manager fixes its HA guests itself, within seconds,
and empties its nodes in maintenance of them. Its moves are listed one by one (guest, from,
to, why and which rule) in the round's explanation (`proxmox_fixes`), the API and the
maintenance panel, so an admin can follow each.
"""

import crs.model
import crs.owed

from .models import Cluster


def proxmox_own(cluster: Cluster, snapshot: crs.model.Snapshot | None) -> list[dict]:
    """The moves Proxmox's HA manager makes itself (crs.owed.proxmox_own); empty on other clusters."""
    if snapshot is None:
        return []
    return list(crs.owed.proxmox_own(snapshot, crs.owed.theirs(snapshot, cluster.is_proxmox)))
