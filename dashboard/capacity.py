"""Capacity and power for the page and the API: how many more standard guests fit (Ganeti's
hspace, crs.capacity), with and without N+1, and which nodes could sleep or wake (hsqueeze,
crs.power).

An admin asks "how many more of these fit?" for a few sizes they know, so each cluster keeps
three (small, medium, large; editable, checked here for the page and the API alike). The plain
counts are computed on request from the latest snapshot (per-node arithmetic: milliseconds at
100 nodes); the N+1-safe counts are the rounds' (`record_hourly`), one figure per size an hour,
which is also the 30-day trend: each re-checks N+1 at every step of its search (seconds at 100
nodes), and every round would store 60 times the rows for a curve that changes with the
guests, not with the minute.

Power: a plan of migrations and the nodes to power down (the medium size is the standard
guest, hsqueeze's minimal and target room 2.0 / 2.0), or the standby nodes to power on first.
Nothing here migrates or powers anything: dashboard/power.py carries out an admin's "power
down", and wake-on-LAN is out of scope. The standby list edited here is what every snapshot
the dashboard builds says is standby (ha.applied).

The N+1-safe counts of the hour run in a task of their own (tasks.capacity_counts), which a
round queues when this hour's figures are missing, so a slow count never delays a round.
"""

import math
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from crs.capacity import GIB, Size, capacity, parse_size
from crs.errors import CrsError
from crs.fits import Limits, committed
from crs.model import Snapshot
from crs.power import room, squeeze

from .errors import BadInput
from .models import DEFAULT_IDLE_WATTS, AuditEvent, CapacitySample, CapacitySettings, Cluster

SIZE_NAMES = ("small", "medium", "large")
STANDARD = "medium"  # hsqueeze's standard guest: the room it keeps is counted in these
MINIMAL = TARGET = 2.0  # hsqueeze's defaults: wake below 2 standard guests of room per node, sleep above 2
TREND = timedelta(days=30)
MAX_CORES = 4096
MIN_MEMORY, MAX_MEMORY = 64 * 2**20, 2**50
MAX_WATTS = 100_000.0
FITS_RULE = (
    "A guest fits on a node when its configured memory is within the node's RAM less the memory "
    "reserve and its configured cores are within the node's CPU threads × the CPU overcommit ratio."
)
WAKE_ON_LAN = (
    "Nothing happens until an admin powers a suggested node down: it drains (its maintenance, the "
    "evacuation approved at once), then a Proxmox cluster shuts it down through its API; other "
    "sources cannot, so you power it off by hand and mark it standby. Powering a standby node on is "
    "yours (its BMC, IPMI or power button): wake-on-LAN is out of scope. Once it is on, take it off "
    "the standby list and out of maintenance."
)


def settings_of(cluster: Cluster) -> CapacitySettings:
    """The cluster's settings; the defaults (unsaved) until an admin edits them."""
    return CapacitySettings.objects.filter(cluster=cluster).first() or CapacitySettings(cluster=cluster)


def size_text(size: dict) -> str:
    """{"cores": 4, "memory_bytes": 8 GiB} → "4c,8g", as the command line's --size writes it."""
    memory = size["memory_bytes"]
    amount = f"{memory / GIB:g}g" if memory % GIB == 0 else f"{memory / 2**20:g}m"
    return f"{size['cores']:g}c,{amount}"


def parsed_size(name: str, text: str) -> dict:
    """The page's "4c,8g" as the API's object; a bad one is refused naming the field."""
    try:
        size = parse_size(text)
    except CrsError as exc:
        raise BadInput({name: [f"{name}: {exc}"]}) from None
    return {"cores": size.cores, "memory_bytes": size.memory_bytes}


# -- editing ---------------------------------------------------------------------------------------


def validated(cluster: Cluster, data: dict) -> dict:
    """The settings fields in `data` (any of small, medium, large, idle_watts, standby), checked;
    every bad field is named with what it allows."""
    errors: dict[str, list[str]] = {}
    values: dict = {}
    for name in SIZE_NAMES:
        if name not in data:
            continue
        size = data[name]
        cores, memory = size.get("cores"), size.get("memory_bytes")
        if not _within(cores, 0.1, MAX_CORES):
            errors.setdefault(name, []).append(f"{name}: cores must be between 0.1 and {MAX_CORES}")
        if not _within(memory, MIN_MEMORY, MAX_MEMORY):
            errors.setdefault(name, []).append(f"{name}: memory_bytes must be between {MIN_MEMORY} (64 MiB) and 2**50")
        values[name] = {"cores": float(cores or 0), "memory_bytes": int(memory or 0)}
    if "idle_watts" in data:
        if not _within(data["idle_watts"], 0, MAX_WATTS):
            errors["idle_watts"] = [f"idle_watts: watts per idle node, between 0 and {MAX_WATTS:g}"]
        values["idle_watts"] = data["idle_watts"]
    if "standby" in data:
        snapshot = cluster.latest_snapshot()
        nodes = [n.name for n in snapshot.nodes] if snapshot else []
        standby = list(data["standby"])
        unknown = [n for n in standby if n not in nodes]
        if unknown:
            allowed = ", ".join(nodes) or "none yet: no snapshot"
            errors["standby"] = [f"standby: {', '.join(map(str, unknown))} not a node of {cluster.name} ({allowed})"]
        elif len(set(standby)) != len(standby):
            errors["standby"] = ["standby: a node is named twice"]
        values["standby"] = standby
    if errors:
        raise BadInput(errors)
    return values


def _within(value, low: float, high: float) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and low <= value <= high


def save_settings(cluster_id: int, data: dict, actor) -> CapacitySettings:
    """Change a cluster's sizes, idle power or standby nodes; audited. Edits of one cluster are
    serialised on its row. The trend's figure of this hour is dropped for a size that changed,
    so the next round records the new size's."""
    with transaction.atomic():
        cluster = Cluster.objects.select_for_update(of=("self",)).select_related("policy").get(pk=cluster_id)
        values = validated(cluster, data)
        settings, _ = CapacitySettings.objects.get_or_create(cluster=cluster)
        before = as_dict(settings)
        values["sizes"] = {**settings.sizes, **{name: values.pop(name) for name in SIZE_NAMES if name in values}}
        if values.get("standby") == settings.standby:
            del values["standby"]  # unchanged: the stored snapshot stays as it is (signals.standby_in_snapshot)
        for field, value in values.items():
            setattr(settings, field, value)
        settings.save(update_fields=list(values))
        after = as_dict(settings)
        if after != before:
            changed = [name for name in SIZE_NAMES if before[name] != after[name]]
            CapacitySample.objects.filter(cluster=cluster, hour=_hour(timezone.now()), size__in=changed).delete()
            details = {"before": before, "after": after}
            AuditEvent.objects.create(actor=actor, action="capacity-settings-changed", cluster=cluster, details=details)
    return settings


def as_dict(settings: CapacitySettings) -> dict:
    """The settings as the API serves and takes them."""
    return {
        **{name: settings.sizes[name] for name in SIZE_NAMES},
        "idle_watts": settings.idle_watts,
        "idle_watts_default": DEFAULT_IDLE_WATTS,
        "standby": settings.standby,
    }


# -- the figures -----------------------------------------------------------------------------------


def report(cluster: Cluster) -> dict | None:
    """What the page and the API show; None before the first snapshot."""
    snapshot = cluster.latest_snapshot()
    if snapshot is None:
        return None
    settings = settings_of(cluster)
    latest = {s.size: s for s in cluster.capacity_samples.filter(hour__gte=_hour(timezone.now()) - timedelta(hours=1))}
    out = figures(snapshot, settings, cluster.policy.limits(), latest)
    return out | {
        "n1_safe_now": (cluster.n1 or {}).get("survives"),
        "trend": trend(cluster),
        "settings": as_dict(settings),
    }


def figures(snapshot: Snapshot, settings: CapacitySettings, limits: Limits, latest: dict) -> dict:
    """The page's figures: the plain counts and the power suggestion from the snapshot
    (milliseconds at 100 nodes); the N+1 counts from the rounds' latest figure of the same size
    (`latest`: size → CapacitySample), as the N+1 count re-checks N+1 at every step of its
    search (over a minute at 100 nodes × 2000 guests, bench/capacity_page.py): null until a
    round has counted the size as it is now."""
    sizes = []
    for name in SIZE_NAMES:
        size = settings.sizes[name]
        plain = capacity(snapshot, Size(size["cores"], size["memory_bytes"]), limits)
        sample = latest.get(name)
        same_size = sample is not None and (sample.cores, sample.memory_bytes) == (size["cores"], size["memory_bytes"])
        current = sample if same_size else None
        sizes.append(
            {
                "size": name,
                "cores": size["cores"],
                "memory_bytes": size["memory_bytes"],
                "text": size_text(size),
                "count": plain.count,
                "limited_by": plain.limited_by,
                "per_node": plain.per_node,
                "count_n1": current.count_n1 if current else None,
                "limited_by_n1": current.limited_by_n1 if current else None,
                "n1_counted_at": current.hour.isoformat() if current else None,
            }
        )
    return {
        "fits_rule": FITS_RULE,
        "cpu_overcommit": limits.cpu_overcommit,
        "memory_reserve_bytes": limits.memory_reserve_bytes,
        "overcommitted": plain.overcommitted,  # the same for every size: what the nodes carry now
        "sizes": sizes,
        "power": power(snapshot, settings, limits),
    }


def power(snapshot: Snapshot, settings: CapacitySettings, limits: Limits) -> dict:
    """hsqueeze's suggestion: nodes to empty and power down (with the migrations and the power
    saved, at the idle power setting), or standby nodes to power on first."""
    standard = settings.sizes[STANDARD]
    asleep = {n.name for n in snapshot.nodes if n.standby}  # the standby list, as ha.applied wrote it
    # first to wake first: the list's order, then a file's own standby nodes
    standby = tuple([n for n in settings.standby if n in asleep] + sorted(asleep - set(settings.standby)))
    size = Size(standard["cores"], standard["memory_bytes"])
    result = squeeze(snapshot, size, limits, minimal=MINIMAL, target=TARGET, standby=standby)
    short = [
        n.name
        for n in snapshot.nodes
        if n.usable and room(n, committed(n, (g for g in snapshot.guests if g.node == n.name)), size, limits) < MINIMAL
    ]
    watts = result.watts_saved({}, settings.idle_watts)
    return {
        "standard_size": STANDARD,
        "standard": size_text(standard),
        "minimal": MINIMAL,
        "target": TARGET,
        "power_off": list(result.power_off),
        "power_on": list(result.power_on),
        "moves": [{"guest": g, "source": s, "target": t} for g, s, t in result.moves],
        "idle_watts": settings.idle_watts,
        "watts_saved": watts,
        "kwh_per_day": round(watts * 24 / 1000, 2),
        "standby": list(standby),
        "short": short,  # nodes with room for fewer than `minimal` standard guests
        "note": WAKE_ON_LAN,
    }


# -- the trend -------------------------------------------------------------------------------------


def _hour(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def missing_sizes(cluster: Cluster) -> list[str]:
    """The sizes without a figure for this hour (a round queues the count while any is missing)."""
    have = set(cluster.capacity_samples.filter(hour=_hour(timezone.now())).values_list("size", flat=True))
    return [name for name in SIZE_NAMES if name not in have]


def record_hourly(cluster: Cluster, snapshot: Snapshot) -> None:
    """One figure per size for this hour, unless recorded already (tasks.capacity_counts; two
    at once record one: the unique constraint); figures older than 30 days go."""
    hour = _hour(timezone.now())
    missing = missing_sizes(cluster)
    if not missing:
        return
    settings, limits = settings_of(cluster), cluster.policy.limits()
    rows = []
    for name in missing:
        size = settings.sizes[name]
        engine_size = Size(size["cores"], size["memory_bytes"])
        plain, safe = capacity(snapshot, engine_size, limits), capacity(snapshot, engine_size, limits, n1_safe=True)
        counts = {"count": plain.count, "count_n1": safe.count, "limited_by_n1": safe.limited_by}
        rows.append(CapacitySample(cluster=cluster, hour=hour, size=name, **counts, **size))
    CapacitySample.objects.bulk_create(rows, ignore_conflicts=True)
    cluster.capacity_samples.filter(hour__lt=hour - TREND).delete()


SPARK_WIDTH, SPARK_HEIGHT = 120, 24


def trend(cluster: Cluster) -> list[dict]:
    """Per size, the hourly figures of the last 30 days (oldest first), for a table and a sparkline."""
    since = _hour(timezone.now()) - TREND
    samples = cluster.capacity_samples.filter(hour__gte=since).order_by("hour")
    out = []
    for name in SIZE_NAMES:
        points = [
            {
                "hour": s.hour.isoformat(),
                "text": size_text({"cores": s.cores, "memory_bytes": s.memory_bytes}),
                "count": s.count,
                "count_n1": s.count_n1,
            }
            for s in samples
            if s.size == name
        ]
        out.append({"size": name, "points": points})
    return out


def sparkline(points: list[dict], key: str) -> str:
    """SVG polyline points for `key` over the points (x: time order, y: scaled to the highest)."""
    if not points:
        return ""
    top = max(p[key] for p in points) or 1
    step = SPARK_WIDTH / max(1, len(points) - 1)
    return " ".join(
        f"{i * step:.1f},{SPARK_HEIGHT - 2 - (SPARK_HEIGHT - 4) * p[key] / top:.1f}" for i, p in enumerate(points)
    )
