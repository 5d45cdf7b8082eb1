"""The guest view: every guest of the latest snapshot in absolute units (cores, GiB) with the rules
it is in, its opt-out, the cooldown left and its last migration; and every node's capacity and
use in the same units beside the percentages. Sorting and filtering are the browser's (guests.js):
the whole list is one page, as an admin scans it.
"""

from django.contrib.auth.decorators import permission_required
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_GET

import crs.fits
import crs.usage
from crs.model import Snapshot

from ..models import Cluster, Migration
from ..wording import natural

GIB = 2**30
STATE_WORDS = {"started": "running", "request_stop": "stopping", "migrate": "migrating", "relocate": "relocating"}


def last_migrations(cluster: Cluster, sids: set[str]) -> dict[str, Migration]:
    """sid → its newest migration that ran (running, done or failed)."""
    newest: dict[str, Migration] = {}
    ran = cluster.migrations.filter(state__in=["running", "done", "failed"]).order_by("-started_at", "-pk")
    for migration in ran.only("guests", "source", "target", "state", "started_at", "finished_at")[:2000]:
        for sid in migration.guests:
            if sid in sids and sid not in newest:
                newest[sid] = migration
    return newest


def guest_rows(cluster: Cluster, snapshot: Snapshot) -> list[dict]:
    now = timezone.now()
    cooldown = cluster.policy.cooldown
    rules: dict[str, list[str]] = {}
    for rule in snapshot.rules:
        for sid in rule.resources:
            rules.setdefault(sid, []).append(rule.id)
    migrations = last_migrations(cluster, {g.sid for g in snapshot.guests})
    rows = []
    for guest in sorted(snapshot.guests, key=lambda g: natural(g.sid)):  # "guest ▲": type, then id
        node = snapshot.node(guest.node)
        last = migrations.get(guest.sid)
        left = 0.0
        if last is not None and last.state in ("done", "failed") and last.finished_at:
            left = max(0.0, (last.finished_at + cooldown - now).total_seconds())
        rows.append(
            {
                "sid": guest.sid,
                "node": guest.node,
                "target": guest.target,
                "state": STATE_WORDS.get(guest.state, guest.state),
                "ha": guest.ha,
                "cores": crs.fits.guest_cores(guest, node),
                "all_cores": guest.cores == 0,
                "memory_gib": guest.memory_bytes / GIB,
                "cpu_usage": guest.cpu_usage,
                "mem_usage_gib": guest.mem_usage_bytes / GIB,
                "rules": rules.get(guest.sid, []),
                "opted_out": not guest.auto_rebalance,
                "cooldown_left": left,
                "cooldown_text": f"{left / 60:.0f} min" if left >= 90 else f"{left:.0f} s",
                "last": last,
            }
        )
    return rows


def node_rows(snapshot: Snapshot, limits: crs.fits.Limits) -> list[dict]:
    """Capacity, configured commitment and measured use per node, in cores and GiB, with the fractions."""
    stats = {s.name: s for s in crs.usage.node_stats(snapshot, "dynamic")}
    usable = frozenset(n.name for n in snapshot.nodes if n.usable)
    rows = []
    for node in sorted(snapshot.nodes, key=lambda n: natural(n.name)):
        held = [g for g in snapshot.guests if node.name in crs.usage.counted_nodes(g, usable | {node.name})]
        commitment = crs.fits.committed(node, held)
        stat = stats.get(node.name)
        rows.append(
            {
                "name": node.name,
                "online": node.online,
                "maintenance": node.maintenance,
                "standby": node.standby,
                "cpus": node.cpus,
                "memory_gib": node.memory_bytes / GIB,
                "cores": commitment.cores,
                "cores_limit": node.cpus * limits.cpu_overcommit,
                "memory_committed_gib": commitment.memory_bytes / GIB,
                "memory_limit_gib": (node.memory_bytes - limits.memory_reserve_bytes) / GIB,
                "cpu_used": stat.cpu if stat else None,
                "cpu_load": stat.cpu_load if stat else None,
                "mem_used_gib": stat.mem / GIB if stat else None,
                "mem_load": stat.mem_load if stat else None,
                "guests": len(held),
                # Stopped guests hold nothing (not in cores or memory) but are there: said beside.
                "stopped": len([g for g in snapshot.guests if g.node == node.name and g.state == "stopped"]),
            }
        )
    return rows


@require_GET
@permission_required("dashboard.view_cluster", raise_exception=True)
def guests_page(request, pk):
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    snapshot = cluster.latest_snapshot()
    context = {
        "cluster": cluster,
        "guests": guest_rows(cluster, snapshot) if snapshot else [],
        "nodes": node_rows(snapshot, cluster.policy.limits()) if snapshot else [],
        "node_names": sorted((n.name for n in snapshot.nodes), key=natural) if snapshot else [],
    }
    return render(request, "dashboard/guests.html", context)
