"""Rolling maintenance: every chosen node taken down in turn, emptied, updated by an admin, brought back.

The engine orders the nodes and groups them (crs.rolling: fewest and smallest guests first; a
group only of nodes none of which is a recovery target of another's guests). Each node goes
through the HA side's maintenance (dashboard/maintenance.py), one group at a time:

    waiting → draining (entered maintenance; its evacuation runs) → waiting-admin (empty: the
    admin updates it and says "node is back") → returning (left maintenance; failback runs) → done

On a Proxmox cluster a node waiting for the admin also moves on by itself when it is seen online
again with a smaller uptime than when it began waiting: it rebooted, so it is updated.

Paused, the rolling maintenance takes no step and starts no further move of a node's evacuation
(RollingMaintenance.holds; the move under way finishes); cancelled, the same for good, the node staying in
maintenance until an admin leaves it from the maintenance panel.

Before a group starts, the cluster with its nodes emptied is checked for N+1 on the latest
snapshot (crs.rolling.breaks_n1, asked by the engine's next step): a group that would break it
is `flagged` and waits for an admin to go on anyway. On a Proxmox cluster maintenance is entered
and left from its command line: the page shows the command, and the steps follow the node's state
in the snapshots.

The queue is in the database and `advance` only reads it and moves it on with conditional
UPDATEs, so it survives a restart of the web and the worker, and two workers running it at
once (a round and a request) take each step once: the side effects (maintenance.enter and
leave) are safe to repeat, and only the caller whose UPDATE took the step audits it.

Its API and page are dashboard/api/rolling.py's: they queue tasks, and tasks call this module.
"""

from dataclasses import dataclass

from django.db import IntegrityError, transaction

import crs.model
import crs.rolling
from crs.rolling import QUEUE, RUN
from crs.sources.proxmox import command as proxmox_command

from . import machine, maintenance
from .errors import BadInput, Refused
from .maintenance import OWED_STATES
from .models import Cluster, RollingMaintenance, RollingNode

MAX_GROUP_SIZE = 64
UNDER_WAY = ("running", "paused")
LABELS = QUEUE.labels
# What a node's step reads as while the rolling maintenance is paused or cancelled, where it differs.
STOPPED_LABELS = {
    ("paused", "draining"): "draining, paused: the move under way finishes, the next wait for resume",
    ("cancelled", "draining"): "left in maintenance, its evacuation stopped (cancelled)",
    ("cancelled", "waiting-admin"): "left in maintenance (cancelled)",
}


def under_way(cluster: Cluster) -> RollingMaintenance | None:
    return cluster.rollings.filter(state__in=UNDER_WAY).first()


def latest(cluster: Cluster) -> RollingMaintenance | None:
    return cluster.rollings.first()


def start(cluster: Cluster, nodes: list[str] | None, group_size: int, at_once: bool, actor) -> RollingMaintenance:
    """Queue the nodes (default: every usable node) in the engine's order and groups. Refused
    (409) while another is under way, on a read-only or archived cluster, or with no snapshot."""
    snapshot = maintenance.changeable_snapshot(cluster)
    names = [n.name for n in snapshot.nodes]
    if nodes is not None:
        unknown = [n for n in nodes if n not in names]
        if unknown or not nodes or len(set(nodes)) != len(nodes):
            why = f"{', '.join(map(repr, unknown))} not in the cluster" if unknown else "each at most once"
            raise BadInput(f"nodes must be some of {', '.join(names)} ({why})", field="nodes")
    if not 1 <= group_size <= MAX_GROUP_SIZE:
        raise BadInput(f"group_size must be between 1 and {MAX_GROUP_SIZE}", field="group_size")
    groups = crs.rolling.groups(snapshot, tuple(nodes) if nodes is not None else None, group_size)
    if not groups:
        raise BadInput("nodes: the cluster has no usable node to take down", field="nodes")
    try:
        with transaction.atomic():
            rolling = RollingMaintenance.objects.create(
                cluster=cluster, group_size=group_size, at_once=at_once, started_by=actor
            )
            order = [(g, name) for g, group in enumerate(groups) for name in group]
            RollingNode.objects.bulk_create(
                RollingNode(rolling=rolling, node=name, position=i, group=g) for i, (g, name) in enumerate(order)
            )
            _audit(rolling, actor, "rolling-started", groups=groups, group_size=group_size, at_once=at_once)
    except IntegrityError:
        raise Refused(f"a rolling maintenance of {cluster.name} is already under way: pause or cancel it") from None
    return rolling


def set_state(cluster: Cluster, wanted: str, actor) -> RollingMaintenance:
    """Pause, resume or cancel; asking for the state it is in changes nothing (safe to repeat)."""
    rolling = latest(cluster)
    if rolling is None:
        raise Refused(f"{cluster.name} has no rolling maintenance")
    action = {"paused": "rolling-paused", "running": "rolling-resumed", "cancelled": "rolling-cancelled"}[wanted]
    stamp = "finished_at" if wanted == "cancelled" else None
    rows = RollingMaintenance.objects.filter(pk=rolling.pk)
    with transaction.atomic():
        # The cluster row's lock, which a migration's start holds (executor.admit): once paused or
        # cancelled here, no move of an evacuation starts that had not started before.
        Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
        if any(machine.step(RUN, rows, "state", before, wanted, stamp=stamp) for before in RUN.sources(wanted)):
            _audit(rolling, actor, action, in_maintenance=in_maintenance(rolling) if wanted == "cancelled" else None)
            rolling.refresh_from_db()
            return rolling
    rolling.refresh_from_db()
    if rolling.state != wanted:
        raise Refused(f"the rolling maintenance of {cluster.name} is {rolling.state}: it cannot be {wanted} now")
    return rolling


def in_maintenance(rolling: RollingMaintenance) -> list[str]:
    """The queue's nodes left in maintenance (cancelled): the admin leaves it from the maintenance panel."""
    return list(rolling.queue.filter(step__in=("draining", "waiting-admin")).values_list("node", flat=True))


def _queued(cluster: Cluster, node) -> tuple[RollingMaintenance, RollingNode]:
    rolling = under_way(cluster)
    if rolling is None:
        raise Refused(f"{cluster.name} has no rolling maintenance under way")
    entry = rolling.queue.filter(node=node).first() if isinstance(node, str) else None
    if entry is None:
        queued = ", ".join(rolling.queue.values_list("node", flat=True))
        raise BadInput(f"node must be one of the queue's nodes: {queued}", field="node")
    return rolling, entry


def node_is_back(cluster: Cluster, node, actor) -> list[int]:
    """The admin's "node is back": it leaves maintenance and its guests return. Only for a node
    waiting for it; repeating it changes nothing. Returns the migrations leaving expired (to push)."""
    rolling, entry = _queued(cluster, node)
    if entry.step in ("returning", "done"):
        return []
    if entry.step != "waiting-admin":
        raise Refused(f"{node} is {LABELS[entry.step]}: it is not waiting for the admin yet")
    expired = [] if cluster.is_proxmox else maintenance.leave(cluster, node, actor)
    with transaction.atomic():
        if machine.step(QUEUE, RollingNode.objects.filter(pk=entry.pk), "step", "waiting-admin", "returning"):
            _audit(rolling, actor, "rolling-step", node=node, step="returning")
    return expired


def go_on(cluster: Cluster, node, actor) -> None:
    """The admin takes a flagged node down although N+1 breaks; safe to repeat."""
    rolling, entry = _queued(cluster, node)
    if entry.step != "flagged" and not entry.go_on:
        raise Refused(f"{node} is {LABELS[entry.step]}: nothing to go on with")
    with transaction.atomic():
        if RollingNode.objects.filter(pk=entry.pk, step="flagged", go_on=False).update(go_on=True):
            _audit(rolling, actor, "rolling-go-on", node=node, warning=entry.warning)


# -- moving it on (a worker: tasks.rolling_round, after every round) --------------------------------


def advance(cluster_id: int) -> bool:
    """Take every step the cluster's state allows now (crs.rolling.next_steps decides); True if a
    node entered maintenance (the caller collects at once, so its evacuation is planned without
    waiting for the next beat)."""
    rolling = RollingMaintenance.objects.filter(cluster_id=cluster_id, state="running").first()
    if rolling is None:
        return False
    cluster = Cluster.objects.select_related("policy").get(pk=cluster_id)
    queue = tuple(crs.rolling.Queued(e.node, e.group, e.step, e.go_on, e.uptime_s) for e in rolling.queue.all())
    snapshot = cluster.latest_snapshot()
    decided = crs.rolling.next_steps(
        queue,
        _seen(cluster, queue, snapshot),
        cluster.is_proxmox,
        crs.rolling.n1_question(snapshot, cluster.policy.limits()),
    )
    if not cluster.is_proxmox:  # on Proxmox the admin runs the command the page shows
        for node in decided.entering:
            maintenance.enter(cluster, node, None, rolling.at_once)
    taken = []
    with transaction.atomic():
        for change in decided.changes:
            if machine.take(rolling.queue.filter(node=change.subject), "step", change):
                _audit(rolling, None, change.action, node=change.subject, **change.details)
                taken.append(change.after)
        if taken:  # the N+1 verdict due: the next round queues its refresh, so the page shows it for this step
            Cluster.objects.filter(pk=cluster_id).update(n1_at=None)
        done = crs.rolling.RUN.change(str(rolling.pk), "running", "done", "rolling-done") if decided.done else None
        if done and machine.take(RollingMaintenance.objects.filter(pk=rolling.pk), "state", done, "finished_at"):
            _audit(rolling, None, done.action)
    return "draining" in taken


def _seen(
    cluster: Cluster, queue: tuple[crs.rolling.Queued, ...], snapshot: crs.model.Snapshot | None
) -> dict[str, crs.rolling.Seen]:
    """What the latest look (`snapshot`) says of each queued node, for the engine's next step."""
    states = {s.node: s for s in maintenance.states(cluster)}
    nodes = {n.name: n for n in snapshot.nodes} if snapshot else {}
    seen = {}
    for e in queue:
        node = nodes.get(e.node)
        seen[e.node] = crs.rolling.Seen(
            drained=maintenance.drained(states.get(e.node)),
            returned=e.step == "returning" and _returned(cluster, e.node),
            online=node is not None and node.online,
            uptime_s=node.uptime_s if node else None,
        )
    return seen


def _returned(cluster: Cluster, node: str) -> bool:
    """Out of maintenance (its record closed by a round that saw it back) and its failback settled."""
    record = cluster.maintenances.filter(node=node).first()
    if record is None or record.left_at is None:
        return False
    return not cluster.migrations.filter(kind="failback", target=node, state__in=OWED_STATES).exists()


def _audit(rolling: RollingMaintenance, actor, action: str, **details) -> None:
    machine.audit(rolling.cluster_id, actor, action, rolling=rolling.pk, **details)


# -- what the page and the API show ----------------------------------------------------------------


@dataclass(frozen=True)
class QueuedNode:
    node: str
    group: int
    step: str
    label: str  # done / draining / waiting for admin / next / waiting …
    warning: str  # why taking it down breaks N+1 ("" = it does not, or not checked yet)
    go_on: bool
    guests_left: int
    evacuating: int
    command: str  # Proxmox: what to run now (enter while draining, leave once back); "" elsewhere
    changed_at: str


def status(cluster: Cluster) -> dict | None:
    """The latest rolling maintenance with its queue, and the cluster's N+1 verdict now."""
    rolling = latest(cluster)
    if rolling is None:
        return None
    states = {s.node: s for s in maintenance.states(cluster)}
    entries = list(rolling.queue.all())
    current = next((e.group for e in entries if e.step != "done"), None)
    upcoming = next((e.group for e in entries if e.step == "waiting" and e.group != current), None)
    queue = []
    for e in entries:
        state = states.get(e.node)
        label = STOPPED_LABELS.get((rolling.state, e.step), LABELS[e.step])
        if e.step == "waiting" and e.group in (current, upcoming) and rolling.state in UNDER_WAY:
            label = "next"
        if e.step == "waiting-admin" and rolling.state == "running" and cluster.is_proxmox and e.uptime_s is not None:
            label = "waiting for admin (or its reboot: seen by its uptime)"
        if e.step == "flagged" and e.go_on:
            label = "going on despite N+1"
        command = ""
        if cluster.is_proxmox and e.step in ("draining", "returning"):
            command = proxmox_command(e.node, e.step == "draining")
        queue.append(
            QueuedNode(
                e.node,
                e.group,
                e.step,
                label,
                e.warning,
                e.go_on,
                state.guests_left if state else 0,
                state.evacuating if state else 0,
                command,
                e.changed_at.isoformat(),
            )
        )
    n1 = cluster.n1 or None
    return {
        "id": rolling.pk,
        "state": rolling.state,
        "group_size": rolling.group_size,
        "at_once": rolling.at_once,
        "started_by": rolling.started_by.get_username() if rolling.started_by else None,
        "started_at": rolling.started_at.isoformat(),
        "finished_at": rolling.finished_at.isoformat() if rolling.finished_at else None,
        "queue": queue,
        "n1": {k: n1[k] for k in ("survives", "verdict", "computed_at")} if n1 else None,
    }
