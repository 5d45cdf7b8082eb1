"""Power down: an admin's "power down <node>" carried out, where hsqueeze only suggests it.

The node drains through its maintenance (dashboard/maintenance.py), not a second machinery:
a node in maintenance is no target of any balancing, pressure or placement move (the engine's
`Node.usable`), and its evacuation plan runs at once through the normal migration path, so the
moves show on the page like any other; they are `consolidation` moves (placed as an evacuation,
ranked below balancing: crs.precedence). Once the latest snapshot shows it empty:

    draining → standby   on Proxmox: `POST /nodes/{node}/status` with `command=shutdown`
    draining → emptied   elsewhere (simulator): the admin powers it off by hand and marks it
                         standby (here, or by adding it to the standby list) → standby

A standby node is on the capacity settings' standby list, and ha.applied writes that list into
every snapshot the dashboard builds: `nodes[].standby`, so no recovery, no placement, not in the
imbalance. It stays in maintenance while it sleeps; waking it is the admin's (power it on:
wake-on-LAN is out of scope), then take it off the standby list and out of maintenance.

On Proxmox maintenance is entered from its command line only: the power-down shows the command
and waits for the node's state, as a rolling maintenance does; the round that sees it enter
approves its evacuation at once. Each step is a conditional UPDATE, so a round and a request
advancing at once take it once, and only the one whose UPDATE took it audits it (and shuts the
node down, under the cluster's source lock).
"""

import time
from dataclasses import dataclass

from django.db import IntegrityError, transaction

import crs.power
from crs.errors import CrsError
from crs.machine import Change
from crs.power import POWER_DOWN
from crs.sources.base import SourceError
from crs.sources.proxmox import command as proxmox_command

from . import capacity, ha, machine, maintenance, n1
from .errors import BadInput, Refused
from .models import CapacitySettings, Cluster, PowerDown

LABELS = POWER_DOWN.labels


def start(cluster: Cluster, node: str, actor) -> PowerDown:
    """Drain `node` to power it down. Refused (with the reason) unless the power suggestion
    empties it now and N+1 survives it; safe to repeat (the open power-down is returned)."""
    snapshot = maintenance.changeable_snapshot(cluster)
    names = [n.name for n in snapshot.nodes]
    if node not in names:
        raise BadInput(f"node must be one of {', '.join(names)}, not {node!r}", field="node")
    if (open_ := cluster.power_downs.filter(node=node, state__in=PowerDown.OPEN).first()) is not None:
        return open_
    if refusal := why_not(cluster, node):
        raise Refused(refusal)
    guests = [g.sid for g in snapshot.guests if g.node == node and g.state == "started"]
    try:
        with transaction.atomic():
            record = PowerDown.objects.create(cluster=cluster, node=node, requested_by=actor)
            _audit(cluster, actor, "power-down-started", node=node, guests=guests)
            if not cluster.is_proxmox:  # on Proxmox the admin runs the command the page shows
                maintenance.enter(cluster, node, actor, at_once=True)
    except IntegrityError:  # two admins at once: the other one's stands
        return cluster.power_downs.get(node=node, state__in=PowerDown.OPEN)
    return record


def why_not(cluster: Cluster, node: str) -> str:
    """Why `node` cannot be powered down now ("" = it can)."""
    snapshot = cluster.latest_snapshot()
    assert snapshot is not None  # changeable_snapshot checked it
    found = snapshot.node(node)
    settings = capacity.settings_of(cluster)
    if found.standby or node in settings.standby:
        return f"{node} is standby already"
    if not found.online:
        return f"{node} is offline: there is nothing to power down"
    if found.maintenance or cluster.maintenances.filter(node=node, left_at=None).exists():
        return f"{node} is in maintenance: take it out of maintenance first, or power it down once it is back"
    suggested = capacity.power(snapshot, settings, cluster.policy.limits())["power_off"]
    if node not in suggested:
        now = f"it suggests {', '.join(suggested)}" if suggested else "it suggests none now"
        return (
            f"{node} is not a node the power suggestion can empty while every other keeps room for "
            f"{capacity.TARGET:g} standard guests ({now})"
        )
    return breaks_n1(cluster, node)


def breaks_n1(cluster: Cluster, node: str) -> str:
    """Why powering `node` down breaks N+1 ("" = it does not). The suggestion counts room as
    hsqueeze does, not N+1: the page asks this of each suggested node too, so a button sure
    to be refused shows the reason instead."""
    warning = n1.breaks(cluster, [node])
    return f"powering {node} down breaks N+1: {warning}" if warning else ""


def mark_standby(cluster: Cluster, node, actor) -> PowerDown:
    """The admin powered an emptied node off by hand: it is standby. Safe to repeat."""
    record = cluster.power_downs.filter(node=node).first() if isinstance(node, str) else None
    if record is None:
        listed = ", ".join(cluster.power_downs.values_list("node", flat=True).distinct()) or "none"
        raise BadInput(f"node must be a node being powered down (power-downs: {listed})", field="node")
    if record.state == "standby":
        return record
    if record.state != "emptied":
        raise Refused(f"{node} is {LABELS[record.state]}: it is not empty and powered off yet")
    with transaction.atomic():
        locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
        if machine.step(POWER_DOWN, PowerDown.objects.filter(pk=record.pk), "state", "emptied", "standby", note=""):
            _audit(cluster, actor, "power-down-standby", node=node, standby=_listed_standby(locked, node))
    record.refresh_from_db()
    return record


# -- moving it on (after every round, in its process: tasks.run_round) ------------------------------


def advance(cluster_id: int) -> None:
    """Take every step the latest snapshot allows (crs.power.next_steps decides): an emptied node
    is shut down (Proxmox) or waits to be powered off by hand; one on the standby list is standby."""
    downs = list(PowerDown.objects.filter(cluster_id=cluster_id, state__in=PowerDown.OPEN))
    if not downs:
        return
    cluster = Cluster.objects.select_related("policy").get(pk=cluster_id)
    states = {s.node: s for s in maintenance.states(cluster)}
    seen = tuple(
        crs.power.PowerDown(
            down.node,
            down.state,
            left=cluster.maintenances.filter(node=down.node, left_at__gte=down.requested_at).exists(),
            drained=maintenance.drained(states.get(down.node)),
        )
        for down in downs
    )
    by_node = {down.node: down for down in downs}
    for change in crs.power.next_steps(seen, tuple(ha.standby_list(cluster)), cluster.is_proxmox):
        if change.action == "power-down-shutdown":
            _shut_down(cluster, by_node[change.subject], change)
        elif machine.take(PowerDown.objects.filter(pk=by_node[change.subject].pk), "state", change):
            _audit(cluster, None, change.action, node=change.subject, **change.details)


def _shut_down(cluster: Cluster, down: PowerDown, change: Change) -> None:
    """The shutdown call and the step to standby in one transaction under the source's lock: it
    is called once, and a refused call leaves the node draining, tried again after the next round."""
    try:
        with Cluster.objects.opened_source(cluster.pk) as (locked, source):
            if not machine.take(PowerDown.objects.filter(pk=down.pk), "state", change):
                return  # another worker took the step
            source.shutdown(down.node, time.time())
            _audit(cluster, None, change.action, node=down.node, standby=_listed_standby(locked, down.node))
    except (SourceError, CrsError) as exc:
        note = f"the shutdown was refused: {exc}; tried again after the next round"
        PowerDown.objects.filter(pk=down.pk, state="draining").update(note=note)


def _listed_standby(cluster: Cluster, node: str) -> list[str]:
    """Put `node` on the standby list (last to wake) and into the stored snapshot at once.
    Call under the cluster row's lock."""
    settings, _ = CapacitySettings.objects.get_or_create(cluster=cluster)
    if node not in settings.standby:
        settings.standby = [*settings.standby, node]
        settings.save(update_fields=["standby"])  # into the stored snapshot: signals.standby_in_snapshot
    return settings.standby


def _audit(cluster: Cluster, actor, action: str, **details) -> None:
    machine.audit(cluster.pk, actor, action, **details)


# -- what the page and the API show ----------------------------------------------------------------


@dataclass(frozen=True)
class PowerDownState:
    node: str
    state: str  # draining, emptied, standby, cancelled
    label: str
    note: str  # what happens next (by hand) or why the shutdown failed
    command: str  # Proxmox, draining but not in maintenance yet: what the admin runs; "" elsewhere
    guests_left: int
    evacuating: int
    requested_by: str | None
    requested_at: str
    changed_at: str


def status(cluster: Cluster, recent: int = 10) -> list[PowerDownState]:
    """The open power-downs and the latest others, newest first."""
    states = {s.node: s for s in maintenance.states(cluster)}
    out = []
    for down in cluster.power_downs.select_related("requested_by")[:recent]:
        state = states.get(down.node)
        draining = down.state == "draining"
        waiting = draining and cluster.is_proxmox and not (state and state.maintenance)
        out.append(
            PowerDownState(
                down.node,
                down.state,
                LABELS[down.state],
                down.note,
                proxmox_command(down.node, True) if waiting else "",
                state.guests_left if state and draining else 0,
                state.evacuating if state and draining else 0,
                down.requested_by.get_username() if down.requested_by else None,
                down.requested_at.isoformat(),
                down.changed_at.isoformat(),
            )
        )
    return out
