"""`GET /cluster/metrics/export` (Proxmox VE 8.3+) over the fake's state, in the shape of
pve-manager's PVE/PullMetric.pm: one flat list of `{id, metric, value, timestamp, type}`, sorted
by timestamp, for nodes (`node/<name>`) and guests (`qemu/<vmid>`, `lxc/<vmid>`). A guest's
`cpu_current` is a fraction of its `cpu_max`, as in `/cluster/resources`; a stopped guest has no
`cpu_current` or `mem_used`. The history is the RRD rows the tests set (node_rrd, guest_rrd);
the latest generation is `/cluster/resources` as it stands, stamped with the fake's `metrics_time`."""

from __future__ import annotations

import time
from typing import Any

# metric → the key of a /cluster/resources entry (nodes and guests alike) and of an RRD row
FROM_RESOURCES = {
    "cpu_current": "cpu",
    "cpu_max": "maxcpu",
    "mem_used": "mem",
    "mem_total": "maxmem",
    "uptime": "uptime",
}
FROM_RRD = {"cpu_current": "cpu", "cpu_max": "maxcpu", "mem_total": "maxmem"}
USAGE = ("cpu_current", "mem_used")  # only while running (PullMetric's get_qemu_metrics)


def export(
    resources: list[dict[str, Any]],
    history: dict[str, list[dict[str, Any]]],
    params: dict[str, str],
    now: float | None,
) -> dict[str, list[dict[str, Any]]]:
    """The answer's `data`: metrics newer than `start-time`, the history only when asked for."""
    start = int(params.get("start-time", 0))
    wanted = set(params["node-list"].split(",")) if params.get("node-list") else None
    stamp = int(time.time() if now is None else now)
    out: list[dict[str, Any]] = []
    for e in resources:
        if e.get("type") not in ("node", "qemu", "lxc") or (wanted and e.get("node") not in wanted):
            continue
        if e.get("type") == "node" and e.get("status") != "online":
            continue  # an offline member is not asked (MetricServer.pm skips it)
        running = e.get("type") == "node" or e.get("status") == "running"
        rows = history.get(e["id"], []) if params.get("history") in ("1", "true") else []
        for row in rows:
            memory = "memused" if e["type"] == "node" else "mem"
            keys = FROM_RRD | ({"mem_used": memory} if row.get("cpu") is not None else {})
            out += _gauges(e["id"], int(row["time"]), row, keys, start)
        if stamp > start:
            keys = {m: k for m, k in FROM_RESOURCES.items() if running or m not in USAGE}
            out += _gauges(e["id"], stamp, e, keys, start)
    return {"data": sorted(out, key=lambda m: m["timestamp"])}


def _gauges(ident: str, stamp: int, row: dict[str, Any], keys: dict[str, str], start: int) -> list[dict[str, Any]]:
    if stamp <= start:
        return []
    return [
        {"id": ident, "metric": metric, "value": float(row[key]), "timestamp": stamp, "type": "gauge"}
        for metric, key in keys.items()
        if row.get(key) is not None
    ]
