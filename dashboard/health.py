"""The service's parts as /healthz and /metrics report them: the database and the channel
layer, probed from the web; the workers and beat, from their heartbeats.

A worker or beat cannot be probed from the web (they are other processes, maybe other
hosts), so each records when it last worked: a worker from its event loop's timer every
two seconds, beat after a pass of its scheduler. The heartbeats live in Redis, which every
process of the distributed mode reaches; the embedded mode runs all in one process and
keeps them in memory. Heartbeats are written at most once a second per process.
"""

import time

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.db.models import Min

WORKER_SILENCE = 10.0  # seconds without a heartbeat from any worker before it counts as down
# The heartbeat a worker writes for each queue it consumes: one for the rounds and migrations, one
# for Proxmox collects (`make worker-proxmox`), so either kind stopped alone is reported down.
QUEUE_HEARTBEATS = {"celery": "worker", "proxmox": "proxmox_worker"}
# Beat is down when it has not ticked within two round intervals of the fastest cluster, but
# never before 10 s: a busy host stalls a healthy process for seconds.
BEAT_SILENCE_FLOOR = 10.0
HEARTBEAT_EVERY = 1.0  # seconds between two writes of one process's heartbeat
# How long the database probe waits for a pooled connection: a request waits up to the pool's
# timeout (10 s) for one, which would keep /healthz from reporting an outage for as long.
DATABASE_WAIT = 3.0
_memory: dict[str, float] = {}  # the embedded mode's heartbeats
_written: dict[str, float] = {}  # this process's last write, per component
_redis = None


def _client():
    global _redis
    if _redis is None:
        import redis

        _redis = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _redis


def _key(component: str) -> str:
    return f"crs:heartbeat:{component}"


def worker_heartbeats(queues) -> list[str]:
    """The heartbeats of a worker consuming `queues` (names)."""
    return [QUEUE_HEARTBEATS[q] for q in queues if q in QUEUE_HEARTBEATS]


def heartbeat(component: str) -> None:
    """Record that `component` ("worker", "proxmox_worker" or "beat") works now. Never raises: with Redis away
    the heartbeat is lost, and the web reports the component as unknown meanwhile."""
    now = time.time()
    if now - _written.get(component, 0.0) < HEARTBEAT_EVERY:
        return
    _written[component] = now
    if not settings.REDIS_URL:
        _memory[component] = now
        return
    try:
        _client().set(_key(component), now, ex=3600)
    except Exception:  # noqa: BLE001  (Redis away: the next beat tries again)
        pass


def _silence(component: str, within: float) -> str:
    """ "ok" if `component` beat within `within` seconds, else why not."""
    if settings.REDIS_URL:
        try:
            value = _client().get(_key(component))
        except Exception as exc:  # a health check reports any failure instead of raising it
            return f"unknown: its heartbeat is in Redis, unreachable ({exc})"
        last = float(value) if value is not None else None
    else:
        last = _memory.get(component)
    if last is None:
        return "down: no heartbeat yet"
    silent = time.time() - last
    return "ok" if silent <= within else f"down: no heartbeat for {silent:.0f} s"


def beat_silence() -> float:
    """Two round intervals of the fastest live cluster, at least BEAT_SILENCE_FLOOR seconds."""
    from .models import Policy

    try:
        fastest = Policy.objects.filter(cluster__archived=False).aggregate(s=Min("round_interval_s"))["s"]
    except Exception:  # noqa: BLE001  (database away: the floor)
        fastest = None
    return max(BEAT_SILENCE_FLOOR, 2.0 * (fastest or 0))


def probe_database() -> None:
    pool = getattr(connection, "pool", None)  # PostgreSQL's (settings.database_pool); None for SQLite
    if pool is None:
        connection.cursor().execute("SELECT 1")
        return
    pool.open()  # Django opens it at a request's first query, which /healthz may come before
    with pool.connection(timeout=DATABASE_WAIT) as conn:
        conn.execute("SELECT 1")


def probe_channel_layer() -> None:
    async_to_sync(get_channel_layer().group_send)("healthz", {"type": "healthz.ping"})


def check(probe) -> str:
    try:
        probe()
    except Exception as exc:  # a health check reports any failure instead of raising it
        return f"error: {exc}"
    return "ok"


def proxmox_needed(database: str) -> bool:
    """A live Proxmox cluster is there, whose collects only a Proxmox worker runs. When the
    database probe failed (`database` not "ok") it cannot say, and the Proxmox worker's silence
    is reported rather than hidden; nor is it asked, which would wait out the pool's timeout
    (10 s) the probe's DATABASE_WAIT keeps /healthz from."""
    from .models import Cluster

    if database != "ok":
        return True
    try:
        return Cluster.objects.filter(archived=False, source_kind="proxmox").exists()
    except Exception:  # noqa: BLE001  (database lost since the probe)
        return True


def components() -> dict[str, str]:
    """Each part's state: "ok", or what is wrong ("error: …", "down: …", "unknown: …"). The
    Proxmox worker is a part only while a Proxmox cluster is connected."""
    database = check(probe_database)
    parts = {
        "database": database,
        "channel_layer": check(probe_channel_layer),
        "worker": _silence("worker", WORKER_SILENCE),
        "beat": _silence("beat", beat_silence() if database == "ok" else BEAT_SILENCE_FLOOR),
    }
    if proxmox_needed(database):
        parts["proxmox_worker"] = _silence("proxmox_worker", WORKER_SILENCE)
    return parts
