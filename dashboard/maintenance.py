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
from dataclasses import dataclass

from django.db import IntegrityError
from django.utils import timezone

import crs.maintenance
import crs.model
import crs.precedence
from crs.errors import CrsError
from crs.sources.base import SourceError
from crs.sources.proxmox import command

from . import expiry, plans
from .models import AuditEvent, Cluster, Maintenance, RollingNode
from .sources import opened_source

OWED_STATES = ("suggested", "approved", "running")
EMPTYING = crs.precedence.EMPTYING


class Refused(Exception):
    """Why a maintenance request cannot be carried out (a 409 for the API, a message on the page)."""


@dataclass(frozen=True)
class NodeState:
    node: str
    maintenance: bool
    guests_left: int  # started guests still on it
    left_to_proxmox: int  # of those, HA guests Proxmox's own manager moves
    evacuating: int  # evacuation moves pending or running
    since: str | None
    command: str  # Proxmox clusters: what to run to enter or leave; "" elsewhere


def enter(cluster: Cluster, node: str, actor, at_once: bool = False) -> Maintenance:
    """Put `node` into maintenance; the next round plans its evacuation. Safe to repeat.

    The record is written under the source's lock with the switch, so no collect (and no
    round) sees the node in maintenance before the record that says who asked and how."""
    snapshot = _checked(cluster, node)
    guests = [g.sid for g in snapshot.guests if g.node == node and g.state == "started"]
    try:
        with opened_source(cluster.pk) as (_, source):
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
        with opened_source(cluster.pk) as (_, source):
            record = cluster.maintenances.filter(node=node, left_at=None).first()
            if record is not None and Maintenance.objects.filter(pk=record.pk, left_by=None).update(left_by=actor):
                AuditEvent.objects.create(
                    actor=actor, action="maintenance-left", cluster=cluster, details={"node": node}
                )
            expired = expiry.maintenance_ended(cluster, node)
            source.maintenance(node, False, time.time())
    except (SourceError, CrsError) as exc:
        raise Refused(str(exc)) from exc
    return expired


def reconcile(
    cluster: Cluster, snapshot: crs.model.Snapshot, powering_down: frozenset[str] = frozenset()
) -> tuple[list[int], list[int]]:
    """One round's part: evacuation plans for nodes in maintenance, failback plans for nodes back.
    Called inside the round's transaction. Returns (migrations changed, migrations approved).

    `powering_down`: nodes emptied for a power-down (dashboard/power.py): their evacuation is a
    consolidation (ranked below balancing) and runs without waiting for approval, also when they
    are seen entering maintenance at the source (Proxmox's CLI)."""
    down = {n.name for n in snapshot.nodes if n.maintenance}
    changed: list[int] = []
    approved: list[int] = []
    for node in sorted(down - set(cluster.maintenances.filter(left_at=None).values_list("node", flat=True))):
        guests = [g.sid for g in snapshot.guests if g.node == node and g.state == "started"]
        # entered at the source (Proxmox CLI); at once if a rolling maintenance under way or a power-down asked for it
        at_once = (
            RollingNode.objects.filter(
                rolling__cluster=cluster,
                rolling__state__in=("running", "paused"),
                rolling__at_once=True,
                node=node,
                step="draining",
            ).exists()
            or node in powering_down
        )
        Maintenance.objects.create(cluster=cluster, node=node, guests=guests, at_once=at_once)
        AuditEvent.objects.create(
            actor=None,
            action="maintenance-entered",
            cluster=cluster,
            details={"node": node, "guests": guests, "at_once": at_once},
        )
    theirs = proxmox_moves(cluster, snapshot)
    for record in cluster.maintenances.filter(left_at=None).exclude(node__in=down):
        if cluster.collected_at is None or cluster.collected_at <= record.entered_at:
            continue  # a snapshot from before the node entered: it cannot say the node left
        if not any(n.name == record.node and n.usable for n in snapshot.nodes):
            continue  # offline: it left maintenance by failing, nothing comes back to it
        Maintenance.objects.filter(pk=record.pk, left_at=None).update(left_at=timezone.now())
        if record.left_by_id is None:  # left at the source (Proxmox CLI), not from here
            AuditEvent.objects.create(
                actor=None, action="maintenance-left", cluster=cluster, details={"node": record.node}
            )
        changed += expiry.maintenance_ended(cluster, record.node)
        plan = crs.maintenance.failback(snapshot, record.node, [sid for sid in record.guests if sid not in theirs])
        c, a = plans.owe(cluster, snapshot, plan.steps, plan.reasons, "failback", record.at_once)
        changed, approved = changed + c, approved + a
    for record in cluster.maintenances.filter(left_at=None, node__in=down).order_by("node"):
        covered = set(
            cluster.migrations.filter(kind__in=EMPTYING, source=record.node, state__in=OWED_STATES).values_list(
                "leader", flat=True
            )
        )
        plan = crs.maintenance.evacuate(snapshot, record.node, skip=frozenset(covered | theirs))
        kind = "consolidation" if record.node in powering_down else "evacuation"
        c, a = plans.owe(cluster, snapshot, plan.steps, plan.reasons, kind, record.at_once)
        changed, approved = changed + c, approved + a
    return changed, approved


def states(cluster: Cluster) -> list[NodeState]:
    """Every node of the latest snapshot: in maintenance or not, and how far its draining got."""
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        return []
    open_ = {m.node: m for m in cluster.maintenances.filter(left_at=None)}
    theirs = proxmox_moves(cluster, snapshot)
    out = []
    for node in snapshot.nodes:
        left = [g.sid for g in snapshot.guests if g.node == node.name and g.state in ("started", "migrate", "relocate")]
        evacuating = cluster.migrations.filter(kind__in=EMPTYING, source=node.name, state__in=OWED_STATES).count()
        since = open_[node.name].entered_at.isoformat() if node.name in open_ else None
        proxmox = cluster.is_proxmox
        out.append(
            NodeState(
                node.name,
                node.maintenance or node.name in open_,
                len(left),
                len([sid for sid in left if sid in theirs]),
                evacuating,
                since,
                command(node.name, not node.maintenance) if proxmox else "",
            )
        )
    return out


def drained(state: NodeState | None) -> bool:
    """In maintenance, no started guest left on it and no evacuation move owed."""
    return state is not None and state.maintenance and state.guests_left == 0 and state.evacuating == 0


def proxmox_moves(cluster: Cluster, snapshot: crs.model.Snapshot) -> frozenset[str]:
    """Guests Proxmox's own HA manager evacuates and brings back: not the product's to plan."""
    if not cluster.is_proxmox:
        return frozenset()
    return frozenset(g.sid for g in snapshot.guests if g.proxmox_ha)


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


def _checked(cluster: Cluster, node: str) -> crs.model.Snapshot:
    snapshot = changeable_snapshot(cluster)
    names = [n.name for n in snapshot.nodes]
    if node not in names:
        raise ValueError(f"node must be one of {', '.join(names)}, not {node!r}")
    return snapshot
