"""What the live page receives: one payload shape per event, for pushes and page loads alike.

`push` is the only sender. The page's embedded history is built by the same functions,
so a reloaded page and a live one show the same thing.
"""

import json
import logging
import time
from datetime import timedelta

from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError

from ..models import Cluster, Migration, Round
from .layers import group_send_blocking

log = logging.getLogger(__name__)


OVERVIEW = "overview"  # the group of the overview pages (every cluster on one page)


def group_name(cluster_id: int) -> str:
    return f"cluster-{cluster_id}"


def round_payload(round_: Round, hold_duration: int) -> dict:
    return {
        "type": "round",
        "at": round_.at.isoformat(),
        "imbalance": round_.imbalance,
        "threshold": round_.threshold,
        "decision": round_.decision,
        "hold_count": round_.hold_count,
        "hold_duration": hold_duration,
        "explanation": round_.explanation,
        "node_usage": round_.node_usage,
        "happiness": round_.happiness,
    }


def migration_payload(migration: Migration) -> dict:
    return {
        "type": "migration",
        "id": migration.pk,
        "state": migration.state,
        "leader": migration.leader,
        "guests": migration.guests,
        "source": migration.source,
        "target": migration.target,
        "imbalance_before": migration.imbalance_before,
        "imbalance_after": migration.imbalance_after,
        "relative_gain": migration.relative_gain,
        "margin": migration.margin,
        "method": migration.method,
        "automatic": migration.automatic,
        "decided_by": migration.decided_by.get_username() if migration.decided_by else None,
        "reason": migration.reason,
        "progress": migration.progress,
        "recommended_at": migration.suggested_at.isoformat(),
        "plan": migration.plan,
        "step": migration.step,
        "after": migration.after,
        "plan_gain": migration.plan_gain,
        "alternatives": migration.alternatives,
        "priority": migration.priority,
        "kind": migration.kind,
        "explanation": migration.explanation,
        "finished_at": migration.finished_at.isoformat() if migration.finished_at else None,
        "observed_5m": migration.observed_5m,
        "observed_1h": migration.observed_1h,
        "downtime": migration.downtime_s,
        "payoff": migration.payoff,  # its gain against its cost (crs.payoff); None: no gate
        # from when the page offers "Mark failed": its follower silent (models.migration.silent)
        "silent_from": silent.isoformat() if (silent := migration.silent_from) else None,
    }


ROUNDS_SHOWN = 5000  # the most rounds one answer carries (CRS_HISTORY_SHOW_HOURS of them at most)


def history(cluster: Cluster, rounds_shown: int = ROUNDS_SHOWN) -> dict:
    """Everything the page shows on load: recent rounds (the page asks for the last one only: its
    trend comes from the history API by range), open and recent migrations."""
    since = timezone.now() - timedelta(hours=settings.CRS_HISTORY_SHOW_HOURS)
    hold_duration = cluster.policy.hold_duration
    rounds = list(cluster.rounds.filter(at__gte=since).order_by("-at")[:rounds_shown])[::-1]
    migrations = cluster.migrations.select_related("decided_by")[:30]
    return {
        "rounds": [round_payload(r, hold_duration) for r in rounds],
        "migrations": [migration_payload(m) for m in migrations],
        "source": source_payload(cluster.source_error, cluster.source_error_at),
        "n1": cluster.n1,  # the last N+1 verdict (dashboard/n1.py), null before the first
    }


def source_payload(error: str, at) -> dict:
    """The source's health: an error text (empty = collecting fine) and when it was seen."""
    return {"type": "source", "error": error, "at": at.isoformat() if at else None}


def stop_payload(cluster: Cluster) -> dict:
    """The cluster's emergency stops (Cluster.stop), pushed when one is set or lifted."""
    stop = cluster.stop()
    return {"type": "stop", **stop, "at": stop["at"].isoformat() if stop["at"] else None}


def push(cluster_id: int, payload: dict) -> None:
    """Send one event to every page watching the cluster. Call it after commit.

    A push is a courtesy, the database is the record: with Redis down the event is logged
    and dropped, and pages catch up from the database when their socket reopens. Raising
    instead would stop a round or leave a running migration unfollowed.
    """
    send(group_name(cluster_id), payload)


def push_overview(rows: list[dict]) -> None:
    """Send the overview's rows to every overview page: one event for a batch of rounds."""
    send(OVERVIEW, {"type": "overview", "rows": rows})


def send(group: str, payload: dict) -> None:
    # Encoded once here, not once per page: the consumers pass the text on as it is.
    text = json.dumps({**payload, "sent_at": time.time()})  # sent_at: bench/latency.py times round → browser
    try:
        group_send_blocking(get_channel_layer(), group, {"type": "cluster.event", "text": text})
    except (OSError, RedisError) as exc:
        log.warning("%s: live update not sent (pages catch up on reconnect): %s", group, exc)


def push_migration(pk: int) -> None:
    migration = Migration.objects.select_related("decided_by").get(pk=pk)
    push(migration.cluster_id, migration_payload(migration))
