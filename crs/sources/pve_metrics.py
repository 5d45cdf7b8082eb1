"""`GET /cluster/metrics/export` (Proxmox VE 8.3+) → recent usage of every node and guest.

One call answers what a guest's `rrddata` answered one guest at a time: pvestatd keeps about
30 minutes of 10-s generations, and the export lists them flat, one `{id, metric, value,
timestamp, type}` per figure (pve-manager's PVE/PullMetric.pm). `cpu_current` is a fraction of
`cpu_max`, as in `/cluster/resources`; a stopped guest has neither it nor `mem_used`.

The connector asks only for what is newer than the last point it folded in (`start-time`),
so an answer holds about one generation, and keeps per node and guest one running mean over
`usage_period`: the plain mean of its first points, then an exponentially weighted one whose
time constant is the period (a 10-s spike weighs 10/300 of a 5-minute mean). That keeps the
state it carries between collects at three numbers a guest.
"""

from __future__ import annotations

import math
from typing import Any

from .base import SourceError
from .pve_resources import number

WHERE = "GET /cluster/metrics/export"
Means = dict[str, list[float]]  # metric id ("node/pve1", "qemu/100") → [timestamp, cores, bytes]


def samples(answer: Any) -> dict[str, list[tuple[float, float, float]]]:
    """Per metric id, its points in time order: (timestamp, CPU in cores, memory in bytes); only
    the points that carry usage (a running guest, an online node)."""
    rows = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(rows, list):
        raise SourceError(f"{WHERE}: expected an object with a `data` list, got {type(answer).__name__}")
    points: dict[tuple[str, float], dict[str, float]] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SourceError(f"{WHERE} data[{i}]: expected an object, got {type(row).__name__}")
        metric, ident = row.get("metric"), row.get("id")
        if metric not in ("cpu_current", "cpu_max", "mem_used"):
            continue
        if not isinstance(ident, str) or not ident:
            raise SourceError(f"{WHERE} data[{i}].id: {ident!r} is not a metric id")
        where = f"{WHERE} {ident} {metric}"
        stamp = number(row, "timestamp", where)
        points.setdefault((ident, stamp), {})[metric] = number(row, "value", where)
    out: dict[str, list[tuple[float, float, float]]] = {}
    for (ident, stamp), p in sorted(points.items(), key=lambda item: item[0][1]):
        if "cpu_current" in p and "mem_used" in p:
            out.setdefault(ident, []).append((stamp, p["cpu_current"] * p.get("cpu_max", 1.0), p["mem_used"]))
    return out


def fold(means: Means, new: dict[str, list[tuple[float, float, float]]], period: float, now: float) -> Means:
    """The running means with the new points folded in; an id without a point for a whole
    period (stopped, gone) is dropped, so its instant figures count again."""
    out = {ident: m for ident, m in means.items() if ident in new or m[0] >= now - period}
    for ident, points in new.items():
        if ident not in out:  # its first points: their plain mean
            n = len(points)
            out[ident] = [points[-1][0], sum(p[1] for p in points) / n, sum(p[2] for p in points) / n]
            continue
        for stamp, cpu, mem in points:
            last, mean_cpu, mean_mem = out[ident]
            if stamp > last:
                weight = 1.0 - math.exp(-(stamp - last) / period)
                out[ident] = [stamp, mean_cpu + weight * (cpu - mean_cpu), mean_mem + weight * (mem - mean_mem)]
    return {ident: [m[0], round(m[1], 4), round(m[2])] for ident, m in out.items()}


def through(means: Means) -> float | None:
    """The newest point folded in: the next answer need hold only what came after it."""
    return max((m[0] for m in means.values()), default=None)


def usage(means: Means, now: float, period: float) -> dict[str, dict[str, Any]]:
    """Snapshot keys per guest sid or node name, for the means with a point within the period."""
    out: dict[str, dict[str, Any]] = {}
    for ident, (stamp, cpu, mem) in means.items():
        kind, _, name = ident.partition("/")
        key = {"node": name, "qemu": f"vm:{name}", "lxc": f"ct:{name}"}.get(kind)
        if key and stamp >= now - period:
            out[key] = {"cpu_usage": cpu, "mem_usage_bytes": float(mem)}
    return out
