"""A cluster's automation state for the engine (crs.automation): level, stop, windows, blackouts, Proxmox's balancer.

The gate is the engine's (crs.windows); this module reads a cluster's windows, blackouts and
time zone into it, adds Proxmox's auto-rebalance (crs.coexistence: two balancers must not
fight), and edits windows and blackouts with an audit event each. A held plan is not lost:
its recommendations wait for a person like under `manual`.
"""

from datetime import datetime
from typing import cast
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

import crs.automation
import crs.coexistence
import crs.windows

from .models import AuditEvent, Blackout, ChangeWindow, Cluster, Migration


def zone_of(cluster: Cluster) -> ZoneInfo:
    return ZoneInfo(cluster.policy.time_zone)


def engine_window(window: ChangeWindow) -> crs.windows.Window:
    return crs.windows.Window(frozenset(window.days), window.start, window.end)


def engine_windows(cluster: Cluster) -> tuple[crs.windows.Window, ...]:
    return tuple(engine_window(w) for w in cluster.change_windows.all())


def engine_blackouts(cluster: Cluster, now: datetime) -> tuple[crs.windows.Blackout, ...]:
    upcoming = cluster.blackouts.filter(ends_at__gt=now)
    return tuple(crs.windows.Blackout(b.starts_at, b.ends_at, b.label) for b in upcoming)


def gate(cluster: Cluster, now: datetime | None = None) -> crs.windows.Gate:
    """Whether automation may start balancing moves now, and until when."""
    now = now or timezone.now()
    return crs.windows.gate(now, zone_of(cluster), engine_windows(cluster), engine_blackouts(cluster, now))


def proxmox_balancer(cluster: Cluster) -> crs.coexistence.ProxmoxBalancer | None:
    """Proxmox's own balancer as the last collect read it; None when the source is not Proxmox."""
    stored = cluster.proxmox_balancer
    return None if stored is None else crs.coexistence.ProxmoxBalancer(**stored)


def state(cluster: Cluster, now: datetime) -> crs.automation.Automation:
    """The cluster's automation state for the engine: level, emergency stop, windows and
    blackouts, Proxmox's own balancer."""
    policy = cluster.policy
    peer = proxmox_balancer(cluster)
    return crs.automation.Automation(
        level=cast(crs.automation.Level, policy.automation),
        automatic_margin=policy.automatic_margin,
        stopped=cluster.stopped,
        time_zone=policy.time_zone,
        windows=engine_windows(cluster),
        blackouts=engine_blackouts(cluster, now),
        proxmox_rebalancing=peer is not None and peer.rebalancing,
    )


def held_reason(cluster: Cluster, now: datetime | None = None) -> str:
    """Why automation may not approve a balancing plan now, in the admin's words; "" = it may."""
    now = now or timezone.now()
    return crs.automation.held_reason(state(cluster, now), now)


def start_held(cluster: Cluster, migration: Migration) -> str:
    """Why the approved `migration` must not start now ("" = it may): crs.automation.start_wait on
    the cluster's automation state. Said in its `reason` (the page's row and the API); it starts
    when a round queues it again with the gate open."""
    now = timezone.now()
    return crs.automation.start_wait(state(cluster, now), migration.automatic, migration.kind, now)


def status(cluster: Cluster, now: datetime | None = None) -> dict:
    """What the page and the API show: the gate, Proxmox's balancer, each window's next run (as
    moments, so the browser shows them in its own zone too)."""
    now = now or timezone.now()
    zone = zone_of(cluster)
    peer = proxmox_balancer(cluster)
    windows = []
    for w in cluster.change_windows.all():
        run = crs.windows.next_occurrence(engine_window(w), now, zone)
        windows.append(
            {
                "id": w.pk,
                "days": sorted(w.days),
                "start": w.start.strftime("%H:%M"),
                "end": w.end.strftime("%H:%M"),
                "next_start": run[0].isoformat() if run else None,
                "next_end": run[1].isoformat() if run else None,
            }
        )
    return {
        "time_zone": cluster.policy.time_zone,
        "automation": cluster.policy.automation,
        "gate": gate(cluster, now).to_dict(),
        "held": held_reason(cluster, now),
        "windows": windows,
        "blackouts": [
            {"id": b.pk, "label": b.label, "starts_at": b.starts_at.isoformat(), "ends_at": b.ends_at.isoformat()}
            for b in cluster.blackouts.filter(ends_at__gt=now)
        ],
        "proxmox_balancer": peer.to_dict() | {"rebalancing": peer.rebalancing} if peer else None,
    }


def add(model, actor, **fields):
    """Create a window or blackout (validated by the caller) and audit it, in one transaction."""
    with transaction.atomic():
        item = model.objects.create(**fields)
        AuditEvent.objects.create(
            actor=actor, action=_action(model, "added"), cluster_id=item.cluster_id, details=described(item)
        )
    return item


def remove(item, actor) -> None:
    with transaction.atomic():
        AuditEvent.objects.create(
            actor=actor, action=_action(type(item), "removed"), cluster_id=item.cluster_id, details=described(item)
        )
        item.delete()


def change(model, pk: int, actor, **fields):
    """Edit a window or blackout: the row locked, the new values checked together with the ones
    kept (two PATCHes, each valid alone, may not together make a window of no time), and an
    audit event with what changed, in one transaction. Raises model.DoesNotExist when it was
    removed meanwhile, ValidationError (field → messages) when the result is not a window."""
    with transaction.atomic():
        item = model.objects.select_for_update().get(pk=pk)
        before = described(item)
        for name, value in fields.items():
            setattr(item, name, value)
        item.clean()
        item.save(update_fields=list(fields))
        after = described(item)
        changes = {name: [before[name], after[name]] for name in after if before[name] != after[name]}
        if changes:
            AuditEvent.objects.create(
                actor=actor,
                action=_action(model, "changed"),
                cluster_id=item.cluster_id,
                details={**after, "changes": changes},
            )
    return item


def _action(model, verb: str) -> str:
    return f"{'window' if model is ChangeWindow else 'blackout'}-{verb}"


def described(item) -> dict:
    """What the audit trail keeps of a window or blackout: enough to read it back after removal."""
    if isinstance(item, ChangeWindow):
        return {"days": sorted(item.days), "start": f"{item.start:%H:%M}", "end": f"{item.end:%H:%M}"}
    assert isinstance(item, Blackout)
    return {"label": item.label, "starts_at": item.starts_at.isoformat(), "ends_at": item.ends_at.isoformat()}
