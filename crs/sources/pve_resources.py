"""Proxmox VE API answers → a crs snapshot, refusing what must not be guessed.

Pure functions over the decoded JSON of `/cluster/resources` and the HA endpoints,
so the quirks of reference/pve-api.md are handled (and tested) in one place:
`cpu` is a fraction of `maxcpu`; numbers may arrive as strings; stopped guests may
lack usage fields; offline nodes may lack their sizes; templates are not guests.
A NaN, a negative or a guest on an unknown node refuses the whole collection with
a reason naming the entry, so stored history never takes in a half-true cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .. import snapshot as contract
from ..errors import CrsError
from ..model import STATES, STATES_ON_TARGET_NODE, Snapshot
from .base import SourceError

_MISSING = object()
DEFAULT_CORES, DEFAULT_MEMORY = 1.0, 512.0 * 2**20  # what Proxmox assumes for an unset VM config


@dataclass(frozen=True)
class HaView:
    """What the HA manager says, where the cluster has one (all empty otherwise)."""

    resources: dict[str, dict[str, Any]] = field(default_factory=dict)  # sid → /cluster/ha/resources entry
    services: dict[str, dict[str, Any]] = field(default_factory=dict)  # sid → manager_status service_status entry
    node_status: dict[str, str] = field(default_factory=dict)  # node → online, maintenance, …
    rules: tuple[dict[str, Any], ...] = ()  # /cluster/ha/rules entries (PVE 9)


def to_snapshot(
    resources: list[dict[str, Any]],
    ha: HaView,
    moving: dict[str, str],
    *,
    cluster: str,
    taken_at: str,
    manage: str = "all",
    details: dict[str, dict[str, Any]] | None = None,
) -> Snapshot:
    """The snapshot of one `/cluster/resources` answer.

    `moving` maps a guest to the target of a migration this product started, the
    only way to know where a non-HA guest with `lock: migrate` is going. `manage`
    is `all` (every guest may be moved) or `ha` (only HA resources, as Proxmox's CRS).
    `details` adds snapshot keys per guest sid or node name that other endpoints
    answer (pressure, migrate preconditions), already converted by this module.
    """
    details = details or {}
    if not isinstance(resources, list):
        raise SourceError(f"cluster/resources: expected a list, got {type(resources).__name__}")
    nodes, unsized = _nodes(resources, ha)
    names = {n["name"] for n in nodes}
    guests = [
        g | details.get(g["sid"], {})
        for g in (_guest(e, names, unsized, ha, moving, manage) for e in resources if e.get("type") in ("qemu", "lxc"))
        if g is not None
    ]
    nodes = [n | details.get(n["name"], {}) for n in nodes]
    rules = _rules(ha.rules, {g["sid"] for g in guests}, sorted(names))
    data = {
        "format": contract.FORMAT,
        "cluster": cluster,
        "taken_at": taken_at,
        "nodes": nodes,
        "guests": guests,
        "rules": rules,
    }
    try:
        return contract.parse(data)
    except CrsError as exc:
        raise SourceError(f"cluster/resources refused: {exc}") from exc


def _nodes(resources: list[dict[str, Any]], ha: HaView) -> tuple[list[dict[str, Any]], set[str]]:
    """Nodes with their sizes, and the names of offline nodes that report none.

    An offline node often lacks maxcpu/maxmem; guessing them would show a false load,
    so such a node and its guests are left out: nothing can move from or to it anyway.
    """
    nodes, unsized = [], set()
    for e in (e for e in resources if e.get("type") == "node"):
        where = f"cluster/resources {e.get('id', 'node')}"
        name = _text(e, "node", where)
        online = e.get("status") == "online"
        if not online and ("maxcpu" not in e or "maxmem" not in e):
            unsized.add(name)
            continue
        maxcpu, maxmem = number(e, "maxcpu", where), number(e, "maxmem", where)
        node = {
            "name": name,
            "online": online,
            "cpus": maxcpu,
            "memory_bytes": maxmem,
            "maintenance": ha.node_status.get(name) == "maintenance",
        }
        if online:
            node |= {"cpu_usage": number(e, "cpu", where) * maxcpu, "mem_usage_bytes": number(e, "mem", where)}
            if "uptime" in e:  # a reboot shows as a smaller uptime (rolling maintenance waits for one)
                node["uptime_s"] = number(e, "uptime", where)
        nodes.append(node)
    return nodes, unsized


def _guest(
    e: dict[str, Any], nodes: set[str], unsized: set[str], ha: HaView, moving: dict[str, str], manage: str
) -> dict[str, Any] | None:
    where = f"cluster/resources {e.get('id', e.get('type'))}"
    if e.get("template") in (1, "1"):  # an int on the wire, a boolean in the schema
        return None  # a template is a source for clones, not a running guest
    node = _text(e, "node", where)
    if node in unsized:
        return None
    if node not in nodes:
        raise SourceError(f"{where}.node: {node!r} is not a node of this cluster")
    vmid = int(number(e, "vmid", where))
    sid = f"{'vm' if e['type'] == 'qemu' else 'ct'}:{vmid}"
    running = e.get("status") == "running"
    state, target = _state(sid, e, running, ha, moving, nodes)
    maxcpu = number(e, "maxcpu", where, _MISSING if running else DEFAULT_CORES)
    return (
        {
            "sid": sid,
            "node": node,
            "state": state,
            "target": target,
            "running": running,
            "cores": maxcpu,
            "memory_bytes": number(e, "maxmem", where, _MISSING if running else DEFAULT_MEMORY),
            "cpu_usage": number(e, "cpu", where, 0.0) * maxcpu if running else 0.0,
            "mem_usage_bytes": number(e, "mem", where, 0.0) if running else 0.0,
            "ha": manage == "all" or sid in ha.resources,
        }
        | ({"proxmox_ha": True} if sid in ha.resources else {})
        | ({"uptime_s": number(e, "uptime", where)} if running and "uptime" in e else {})
        | _lock(e)
    )


def _lock(e: dict[str, Any]) -> dict[str, Any]:
    """The guest's config lock, read from the same `cluster/resources` entry each collect (no
    extra request); `migrate` is left out: a migration under way shows as the state (_state)."""
    lock = e.get("lock")
    return {"lock": str(lock)} if lock and lock != "migrate" else {}


def _state(
    sid: str, e: dict[str, Any], running: bool, ha: HaView, moving: dict[str, str], nodes: set[str]
) -> tuple[str, str | None]:
    """The HA state where HA manages the guest, else started/stopped; moving guests get their target."""
    hastate = e.get("hastate")
    state = hastate if hastate in STATES else ("started" if running else "stopped")
    target = ha.services.get(sid, {}).get("target") or moving.get(sid)
    if e.get("lock") == "migrate" and sid in moving and state == "started":
        state = "migrate"
    if state in STATES_ON_TARGET_NODE:
        if target in nodes:
            return state, target
        return ("started" if running else "stopped"), None  # moving, but to where we cannot tell
    return state, None


def _rules(raw: tuple[dict[str, Any], ...], sids: set[str], nodes: list[str]) -> list[dict[str, Any]]:
    """PVE 9 HA rules in the snapshot's terms; disabled rules and absent guests are left out."""
    out = []
    for r in raw:
        if r.get("disable") in (1, "1"):
            continue
        members = [s for s in _split(r.get("resources", "")) if s in sids]
        if r.get("type") == "node-affinity" and members:
            out.append(
                {
                    "id": r["rule"],
                    "type": "node-affinity",
                    "resources": members,
                    "nodes": _rule_nodes(r, nodes),
                    "strict": bool(r.get("strict", 0)),
                }
            )
        elif r.get("type") == "resource-affinity" and len(members) >= 2:
            out.append(
                {
                    "id": r["rule"],
                    "type": "resource-affinity",
                    "resources": members,
                    "affinity": r.get("affinity", "positive"),
                }
            )
    return [r for r in out if r["type"] != "node-affinity" or r["nodes"]]


def _rule_nodes(rule: dict[str, Any], nodes: list[str]) -> list[dict[str, Any]]:
    listed = {}
    for item in _split(rule.get("nodes", "")):
        name, _, priority = item.partition(":")
        if name in nodes:
            listed[name] = int(priority) if priority.isdigit() else 0
    if rule.get("affinity") == "negative":  # "not on these" = "on any of the others"
        return [{"node": n, "priority": 0} for n in nodes if n not in listed]
    return [{"node": n, "priority": p} for n, p in listed.items()]


def _split(value: Any) -> list[str]:
    items = value if isinstance(value, list) else str(value).split(",")
    return [s.strip() for s in items if s.strip()]


@dataclass(frozen=True)
class GuestRef:
    """A guest of a `/cluster/resources` answer, as the per-guest calls address it."""

    sid: str  # vm:100, ct:300
    kind: str  # qemu, lxc
    vmid: int
    node: str
    running: bool


def guest_refs(resources: list[dict[str, Any]]) -> list[GuestRef]:
    """The guests (templates too) of one answer, each checked for what a call needs, so that a
    malformed entry is refused naming it and its field, before any call is made for it."""
    out = []
    for e in resources:
        if isinstance(e, dict) and e.get("type") in ("qemu", "lxc"):
            where = f"cluster/resources {e.get('id', e.get('type'))}"
            vmid = int(number(e, "vmid", where))
            sid = f"{'vm' if e['type'] == 'qemu' else 'ct'}:{vmid}"
            out.append(GuestRef(sid, e["type"], vmid, _text(e, "node", where), e.get("status") == "running"))
    return out


def number(entry: dict[str, Any], key: str, where: str, default: Any = _MISSING) -> float:
    """A finite, non-negative number; PVE sends some as strings ("0.00")."""
    value = entry.get(key, default)
    if value is _MISSING:
        raise SourceError(f"{where}.{key}: missing")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise SourceError(f"{where}.{key}: {entry[key]!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SourceError(f"{where}.{key}: {entry.get(key, value)!r} is not a finite number")
    if value < 0:
        raise SourceError(f"{where}.{key}: {value!r} is negative")
    return float(value)


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise SourceError(f"{where}.{key}: {value!r} is not a name")
    return value


# Proxmox VE 9's pressure stall fields, the 10 s average in percent (reference/vm-balancer.md §10).
PSI_FIELDS = {
    "cpu_some": "pressurecpusome",
    "cpu_full": "pressurecpufull",
    "memory_some": "pressurememorysome",
    "memory_full": "pressurememoryfull",
    "io_some": "pressureiosome",
    "io_full": "pressureiofull",
}


def pressure(entry: dict[str, Any], where: str) -> dict[str, Any] | None:
    """The snapshot's `pressure` (fractions) of a guest list entry or status; None on Proxmox VE 8,
    which has no such fields. Containers send the percentages as strings; nodes lack cpufull."""
    present = {k: number(entry, f, where) / 100 for k, f in PSI_FIELDS.items() if entry.get(f) is not None}
    return {k: min(v, 1.0) for k, v in present.items()} or None


def rrd_pressure(rows: list[dict[str, Any]], since: float, where: str) -> dict[str, Any] | None:
    """A node's pressure as the mean of its 1-minute RRD rows from `since` on (node PSI exists
    only there); None when no row in the period has any."""
    recent = [r for r in rows if isinstance(r, dict) and number(r, "time", where, 0.0) >= since]
    samples = [p for p in (pressure(r, f"{where} time {r.get('time')}") for r in recent) if p]
    if not samples:
        return None
    keys = sorted({k for p in samples for k in p})
    return {k: sum(p.get(k, 0.0) for p in samples) / len(samples) for k in keys}


def rrd_usage(rows: list[dict[str, Any]], since: float, where: str, memory: str) -> dict[str, Any] | None:
    """CPU (cores) and memory (bytes, the row's `memory` key: `memused` on nodes, `mem` on guests)
    as the mean of the 1-minute RRD rows from `since` on; None when no row in the period has usage
    (a stopped guest's rows carry only sizes)."""
    recent = [
        r for r in rows if isinstance(r, dict) and r.get("cpu") is not None and number(r, "time", where, 0.0) >= since
    ]
    if not recent:
        return None
    cpu = [number(r, "cpu", where) * number(r, "maxcpu", where, 1.0) for r in recent]
    mem = [number(r, memory, where, 0.0) for r in recent]
    return {"cpu_usage": sum(cpu) / len(cpu), "mem_usage_bytes": sum(mem) / len(mem)}


def preconditions(answer: dict[str, Any], where: str) -> dict[str, Any]:
    """`GET …/qemu/{vmid}/migrate` → where the guest may go, why not elsewhere, and whether it
    could be recovered on another node (local disks and passed-through devices tie it)."""
    if not isinstance(answer, dict):
        raise SourceError(f"{where}: expected an object, got {type(answer).__name__}")
    allowed = _split(answer.get("allowed_nodes", []))
    disks = [
        d.get("volid", "?")
        for d in answer.get("local_disks", []) or []
        if isinstance(d, dict) and not _flag(d.get("cdrom")) and not _flag(d.get("is_unused"))
    ]
    devices = [str(r) for r in answer.get("local_resources", []) or []]
    reasons = []
    for node, why in sorted((answer.get("not_allowed_nodes") or {}).items()):
        storages = ", ".join(why.get("unavailable_storages", [])) if isinstance(why, dict) else ""
        reasons.append(f"{node}: storage {storages} unavailable" if storages else f"{node}: refused by Proxmox")
    if disks:
        reasons.append(f"local disk {', '.join(disks)}")
    if devices:
        reasons.append(f"local device {', '.join(devices)}")
    return {"allowed_nodes": allowed, "recoverable": not (disks or devices)} | (
        {"pinned_reason": "; ".join(reasons)} if reasons else {}
    )


def _flag(value: Any) -> bool:
    return value in (True, 1, "1")
