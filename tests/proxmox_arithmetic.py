"""Proxmox's auto-rebalance arithmetic written out plainly, to check the engine against.

Independent of `crs`: it reads a crs-snapshot/1 document (dicts, as in a file) and does
what pve-ha-manager's `load_balance` and proxmox-resource-scheduling's scheduler do for
one round whose hold duration is served (reference/proxmox-crs.md §4.4), for the cases
the tests generate: every guest started and running, positive resource affinity only,
bruteforce. Nodes sum their guests in sid order (a `cores` 0 guest counts as all of its
node's CPUs in static mode); a candidate subtracts its bundle's summed `maxcpu`/`maxmem`
(static) or measured usage (dynamic) from the source, clamped at zero, and adds it to the
target; the imbalance is truncated to 15 decimals; the margin is on the relative change.
"""

from __future__ import annotations

import math


def imbalance(loads: list[float], scale: str) -> float:
    count, total = len(loads), 0.0
    for value in loads:
        total += value
    if count < 2 or total == 0.0:
        return 0.0
    mean = total / count
    squared = 0.0
    for value in loads:
        squared += (value - mean) ** 2
    cv = math.sqrt(squared / count) / mean
    return cv / math.sqrt(count - 1) if scale == "normalized" else cv


def truncated(value: float) -> float:
    return math.trunc(value * 1e15) / 1e15


def node_sums(doc: dict) -> tuple[dict[str, float], dict[str, float]]:
    """Per node (cpu, mem) as Proxmox accumulates them."""
    mode = doc["settings"]["mode"]
    nodes = {n["name"]: n for n in doc["nodes"]}
    cpu = dict.fromkeys(sorted(nodes), 0.0)
    mem = dict.fromkeys(sorted(nodes), 0.0)
    if mode == "dynamic":
        for name, n in nodes.items():
            if "cpu_usage" in n:
                cpu[name], mem[name] = n["cpu_usage"], n["mem_usage_bytes"]
    for g in sorted(doc["guests"], key=lambda g: g["sid"]):
        name = g["node"]
        if mode == "static":
            cpu[name] += g["cores"] if g["cores"] > 0 else nodes[name]["cpus"]
            mem[name] += g["memory_bytes"]
        elif "cpu_usage" not in nodes[name]:
            cpu[name] += g["cpu_usage"]
            mem[name] += g["mem_usage_bytes"]
    return cpu, mem


def bundles(doc: dict) -> list[tuple[str, list[dict]]]:
    """(leader, members) of every managed guest that may move, members in sid order; an
    unmanaged partner is not in Proxmox's service states, so the rule passes it by."""
    partners: dict[str, set[str]] = {}
    for rule in doc.get("rules", []):
        if rule["type"] == "resource-affinity" and rule["affinity"] == "positive":
            for sid in rule["resources"]:
                partners.setdefault(sid, set()).update(s for s in rule["resources"] if s != sid)
    managed = {g["sid"]: g for g in doc["guests"] if g.get("ha", True)}  # Proxmox's service states
    found: dict[str, list[dict]] = {}
    for sid in sorted(managed):
        members = [managed[s] for s in sorted({sid} | partners.get(sid, set())) if s in managed]
        if all(m.get("auto_rebalance", True) for m in members):
            found.setdefault(members[0]["sid"], members)
    return sorted(found.items())


def loads(doc: dict, cpu: dict[str, float], mem: dict[str, float]) -> list[float]:
    nodes = {n["name"]: n for n in doc["nodes"]}
    return [(cpu[n] / nodes[n]["cpus"] + mem[n] / nodes[n]["memory_bytes"]) / 2.0 for n in sorted(nodes)]


def after_move(doc: dict, members: list[dict], target: str) -> float:
    """The truncated imbalance with `members` as if moved to `target`."""
    cpu, mem = node_sums(doc)
    static = doc["settings"]["mode"] == "static"
    moving_cpu = moving_mem = 0.0
    for m in members:
        moving_cpu += m["cores"] if static else m["cpu_usage"]
        moving_mem += m["memory_bytes"] if static else m["mem_usage_bytes"]
    source = members[0]["node"]
    cpu[source] = max(0.0, cpu[source] - moving_cpu)
    mem[source] = max(0.0, mem[source] - moving_mem)
    cpu[target] += moving_cpu
    mem[target] += moving_mem
    return truncated(imbalance(loads(doc, cpu, mem), doc["settings"].get("imbalance_scale", "normalized")))


def round_of(doc: dict) -> dict:
    """{imbalance, decision, move: (leader, source, target, imbalance after) or None}."""
    settings = doc["settings"]
    before = imbalance(loads(doc, *node_sums(doc)), settings.get("imbalance_scale", "normalized"))
    if before <= settings.get("threshold", 0.3):
        return {"imbalance": before, "decision": "below-threshold", "move": None}
    candidates = [
        (after_move(doc, members, target), leader, members[0]["node"], target)
        for leader, members in bundles(doc)
        for target in sorted(n["name"] for n in doc["nodes"])
        if target != members[0]["node"]
    ]
    if not candidates:
        return {"imbalance": before, "decision": "no-candidate", "move": None}
    best = min(candidates)  # lowest imbalance after, ties by (leader, source, target)
    gain = (before - best[0]) / before
    decision = "migrate" if gain >= settings.get("margin", 0.1) else "below-margin"
    return {"imbalance": before, "decision": decision, "move": (best[1], best[2], best[3], best[0])}
