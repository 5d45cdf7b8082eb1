"""The N+1 verdict: can the cluster lose any one node and still restart every HA guest (crs.n1)?

N+1 places every HA guest once per node, which takes about a second on a mid-sized cluster,
so it is recomputed every N1_EVERY rather than every round, by a task a round queues beside
itself (tasks.n1_refresh), and the verdict says when it was computed. The stored verdict keeps
per lost node what goes wrong (the overloaded nodes with their loads, up to EXAMPLES lost
guests, counts): where each guest would go is computed from the latest snapshot when an admin
opens that node (`loss_of`), so the verdict grows with the nodes, not with nodes².
"""

import math
import time
from dataclasses import asdict
from datetime import timedelta

from django.utils import timezone

import crs.model
import crs.n1
import crs.n1_batch
import crs.rolling

from . import events
from .models import Cluster

N1_EVERY = timedelta(seconds=60)
EXAMPLES = 10  # guests named per loss in the stored verdict (lost, down with it); the rest are counted


def due(cluster: Cluster) -> bool:
    """Never computed, older than N1_EVERY, or cleared by a change the verdict must see."""
    return cluster.n1_at is None or timezone.now() - cluster.n1_at >= N1_EVERY


def refresh(cluster: Cluster, snapshot: crs.model.Snapshot) -> dict | None:
    """Compute, store and return the verdict when it is due; None when the last one is fresh
    (a refresh delivered twice computes it once)."""
    if not due(cluster):
        return None
    started = time.monotonic()
    report = crs.n1_batch.verdict(snapshot, cluster.policy.limits())
    now = timezone.now()
    verdict = verdict_dict(report, now, time.monotonic() - started)
    stored = Cluster.objects.filter(pk=cluster.pk)
    # Good → bad is told once: of two writers only the one whose UPDATE still found it good sends.
    if not verdict["survives"] and stored.filter(n1__survives=True).update(n1=verdict, n1_at=now):
        events.n1_turned_bad.send(Cluster, cluster=cluster, verdict=verdict)
    else:
        stored.update(n1=verdict, n1_at=now)
    return verdict


def verdict_dict(report: crs.n1.N1Report[crs.n1.LossVerdict], at, seconds: float) -> dict:
    """The verdict as stored, pushed (type "n1") and served: fractions, as the engine gives them."""
    return _finite(
        {
            "type": "n1",
            "computed_at": at.isoformat(),
            "seconds": round(seconds, 3),
            "survives": report.survives,
            "verdict": report.verdict,
            "losses": [
                {
                    "node": loss.node,
                    "survived": loss.survived,
                    "summary": f"losing {loss.node} {loss.summary()}",
                    "overloaded": [asdict(load) for load in loss.overloaded],
                    "lost": list(loss.lost[:EXAMPLES]),
                    "lost_count": len(loss.lost),
                    "recovered": loss.recovered,
                    "down": list(loss.down[:EXAMPLES]),
                    "down_count": len(loss.down),
                }
                for loss in report.losses
            ],
        }
    )


def loss_of(cluster: Cluster, node: str) -> dict | None:
    """Losing `node` in full, from the latest snapshot: where each HA guest would go, why a lost
    one is lost, the non-HA guests down with it, and the load of each node taking guests.
    None when `node` is not one of the snapshot's usable nodes (or nothing is collected yet)."""
    snapshot = cluster.latest_snapshot()
    if snapshot is None or node not in {n.name for n in snapshot.nodes if n.usable}:
        return None
    loss = crs.n1.lose(snapshot, node, cluster.policy.limits())
    targets = {r.target for r in loss.recoveries}
    return _finite(
        {
            "node": node,
            "survived": loss.survived,
            "summary": f"losing {node} {loss.summary()}",
            "recoveries": [asdict(r) for r in loss.recoveries],
            "loads": [asdict(load) for load in loss.loads if load.node in targets],
            "overloaded": [asdict(load) for load in loss.overloaded],
            "lost": list(loss.lost),
            "down": list(loss.down),
        }
    )


def _finite(value):
    """JSON (and PostgreSQL) hold no infinity: a node with no room at all (reserve ≥ its memory) says null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def breaks(cluster: Cluster, nodes: list[str]) -> str:
    """crs.rolling.breaks_n1 on the latest snapshot, under the cluster's fits settings."""
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        return ""
    return crs.rolling.breaks_n1(snapshot, nodes, cluster.policy.limits())
