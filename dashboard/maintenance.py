"""Node maintenance: an admin takes a node down, the product empties it, and brings guests back.

Entering flips the node into maintenance at the source (the simulator honours it; a Proxmox
cluster takes it only from its command line, so the page shows the command and the product
reads the state back from the HA status) and records who asked and the guests it held. From
then on every round reconciles (`reconcile`): a node the snapshot shows in maintenance gets an
evacuation plan for its guests that no evacuation covers yet (crs.maintenance, Proxmox's
placement), and a node back out of it gets the failback plan. On a Proxmox cluster its HA
manager moves its own HA guests, so the plans hold only the others. The draining is what the
latest snapshot still shows on the node.
"""

import time
from dataclasses import dataclass, replace

from django.db import IntegrityError
from django.db.models import Max

import crs.model
import crs.owed
import crs.precedence
from crs.errors import CrsError
from crs.sources.base import SourceError
from crs.sources.proxmox import command

from .errors import BadInput, Refused
from .models import AuditEvent, Cluster, Maintenance, Migration
from .wording import natural

OWED_STATES = ("suggested", "approved", "running")
EMPTYING = crs.precedence.EMPTYING


@dataclass(frozen=True)
class NodeState:
    node: str
    maintenance: bool
    guests_left: int  # started guests still on it
    left_to_proxmox: int  # of those, HA guests Proxmox's own manager moves
    evacuating: int  # evacuation moves pending or running
    since: str | None
    command: str  # Proxmox clusters: what to run to enter or leave; "" elsewhere
    stopped: int  # stopped guests on it: not counted in guests_left, said beside it
    moving: int  # of guests_left, those being moved now (by anyone)
    emptied_at: str | None  # in maintenance and empty: when its last guest moved off


def enter(cluster: Cluster, node: str, actor, at_once: bool = False) -> Maintenance:
    """Put `node` into maintenance; the next round plans its evacuation. Safe to repeat.

    The record is written under the source's lock with the switch, so no collect (and no
    round) sees the node in maintenance before the record that says who asked and how."""
    snapshot = _checked(cluster, node)
    guests = [g.sid for g in snapshot.guests if g.node == node and g.state == "started"]
    try:
        with Cluster.objects.opened_source(cluster.pk) as (_, source):
            if (open_ := cluster.maintenances.filter(node=node, left_at=None).first()) is not None:
                return open_
            record = Maintenance.objects.create(
                cluster=cluster, node=node, entered_by=actor, guests=guests, at_once=at_once
            )
            AuditEvent.objects.create(
                actor=actor,
                action="maintenance-entered",
                cluster=cluster,
                details={"node": node, "guests": guests, "at_once": at_once},
            )
            source.maintenance(node, True, time.time())
    except IntegrityError:  # two admins at once: the other one's record stands
        return cluster.maintenances.get(node=node, left_at=None)
    except (SourceError, CrsError) as exc:
        raise Refused(str(exc)) from exc
    return record


def leave(cluster: Cluster, node: str, actor) -> list[int]:
    """Take `node` out of maintenance; its evacuation stops, and the next round, seeing the node
    back, closes the maintenance and plans the way back. Safe to repeat. Returns the migrations
    it expired (the caller pushes them: this module queues no tasks)."""
    _checked(cluster, node)
    try:
        with Cluster.objects.opened_source(cluster.pk) as (_, source):
            record = cluster.maintenances.filter(node=node, left_at=None).first()
            if record is not None and Maintenance.objects.filter(pk=record.pk, left_by=None).update(left_by=actor):
                AuditEvent.objects.create(
                    actor=actor, action="maintenance-left", cluster=cluster, details={"node": node}
                )
            expired = _evacuation_stopped(cluster, node)
            source.maintenance(node, False, time.time())
    except (SourceError, CrsError) as exc:
        raise Refused(str(exc)) from exc
    return expired


def states(cluster: Cluster) -> list[NodeState]:
    """Every node of the latest snapshot: in maintenance or not, and how far its draining got."""
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        return []
    open_ = {m.node: m for m in cluster.maintenances.filter(left_at=None)}
    theirs = proxmox_moves(cluster, snapshot)
    out = []
    for node in sorted(snapshot.nodes, key=lambda n: natural(n.name)):
        on = [g for g in snapshot.guests if g.node == node.name]
        left = [g.sid for g in on if g.state in ("started", "migrate", "relocate")]
        evacuating = cluster.migrations.filter(kind__in=EMPTYING, source=node.name, state__in=OWED_STATES).count()
        entered = open_[node.name] if node.name in open_ else None
        proxmox = cluster.is_proxmox
        state = NodeState(
            node.name,
            node.maintenance or entered is not None,
            len(left),
            len([sid for sid in left if sid in theirs]),
            evacuating,
            entered.entered_at.isoformat() if entered else None,
            command(node.name, not node.maintenance) if proxmox else "",
            len([g for g in on if g.state == "stopped"]),
            len([g for g in on if g.state in ("migrate", "relocate")]),
            None,
        )
        out.append(replace(state, emptied_at=emptied_at(cluster, entered)) if entered and drained(state) else state)
    return out


def emptied_at(cluster: Cluster, entered: Maintenance) -> str:
    """When a drained node emptied: its last move off it since it entered maintenance finished
    then, or it was empty when it entered."""
    moves = cluster.migrations.filter(source=entered.node, state="done", finished_at__gte=entered.entered_at)
    last = moves.aggregate(last=Max("finished_at"))["last"]
    return (last or entered.entered_at).isoformat()


def drained(state: NodeState | None) -> bool:
    """In maintenance, no started guest left on it and no evacuation move owed."""
    return state is not None and state.maintenance and state.guests_left == 0 and state.evacuating == 0


def proxmox_moves(cluster: Cluster, snapshot: crs.model.Snapshot) -> frozenset[str]:
    """Guests Proxmox's own HA manager evacuates and brings back: not the product's to plan."""
    return crs.owed.theirs(snapshot, cluster.is_proxmox)


def changeable_snapshot(cluster: Cluster) -> crs.model.Snapshot:
    """The snapshot a maintenance (single or rolling) starts from; refused on a read-only or
    archived cluster, or before its first collection."""
    if cluster.read_only:
        raise Refused(f"cluster {cluster.name} is a read-only what-if cluster: no node goes into maintenance there")
    if cluster.archived:
        raise Refused(f"cluster {cluster.name} is archived: it runs no rounds and no migrations")
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        raise Refused("this cluster has no snapshot yet (its first collection has not run)")
    return snapshot


def _evacuation_stopped(cluster: Cluster, node: str) -> list[int]:
    """The evacuation of `node` stops where it is: its moves not started expire (expiry.py lists the causes)."""
    reason = f"{node} left maintenance before this move started"
    return [
        m.pk
        for m in cluster.migrations.filter(kind__in=EMPTYING, source=node, state__in=["suggested", "approved"])
        if Migration.objects.transition(m.pk, m.state, "expired", None, reason=reason)
    ]


def _checked(cluster: Cluster, node: str) -> crs.model.Snapshot:
    snapshot = changeable_snapshot(cluster)
    names = [n.name for n in snapshot.nodes]
    if node not in names:
        raise BadInput(f"node must be one of {', '.join(names)}, not {node!r}", field="node")
    return snapshot
