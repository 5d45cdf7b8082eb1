"""The crs-snapshot/1 file contract: parse (validating every key) and serialize.

Validation happens here, once; the rest of the engine trusts a `Snapshot`. Every
refusal names the key path and the offending value, so an admin can fix the file
(reference/snapshot-format.md).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from .errors import RuleError, SnapshotError
from .model import (
    METHODS,
    MODES,
    SCALES,
    STATES,
    STATES_ON_TARGET_NODE,
    Guest,
    Node,
    NodeAffinityRule,
    ResourceAffinityRule,
    Rule,
    Settings,
    Snapshot,
)

FORMAT = "crs-snapshot/1"
SID_PATTERN = re.compile(r"^(vm|ct):[0-9]+$")
_MISSING = object()
_STATE_NAMES = tuple(sorted(STATES))
_GUEST_KEYS = frozenset(Guest.__dataclass_fields__)
_NODE_KEYS = frozenset(Node.__dataclass_fields__)


def load_file(path: str | Path) -> Snapshot:
    """Read and validate a snapshot file."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    return parse(data)


def _refuse_constant(name: str) -> float:
    raise SnapshotError(f"{name} is not a number: use finite values only")


def parse(data: Any) -> Snapshot:
    """Turn decoded JSON into a `Snapshot`, or raise naming the first bad key."""
    if not isinstance(data, dict):
        raise SnapshotError(f"snapshot: expected an object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise SnapshotError(f"format: {data.get('format')!r} is not supported; use {FORMAT!r}")
    settings = parse_settings(data.get("settings", {}), "settings")
    nodes = _parse_list(data, "nodes", _parse_node)
    if not nodes:
        raise SnapshotError("nodes: a snapshot needs at least one node")
    _refuse_duplicates([n.name for n in nodes], "nodes", "name")
    node_names = {n.name for n in nodes}
    guests = _parse_list(data, "guests", lambda g, p: _parse_guest(g, p, node_names))
    _refuse_duplicates([g.sid for g in guests], "guests", "sid")
    sids = {g.sid for g in guests}
    rules = _parse_list(data, "rules", lambda r, p: parse_rule(r, p, sids, node_names))
    _refuse_duplicates([r.id for r in rules], "rules", "id")
    cluster = data.get("cluster", "")
    if not isinstance(cluster, str):
        raise SnapshotError(f"cluster: {cluster!r} is not a string")
    taken_at = data.get("taken_at")
    if taken_at is not None and not isinstance(taken_at, str):
        raise SnapshotError(f"taken_at: {taken_at!r} is not a timestamp string")
    return Snapshot(tuple(nodes), tuple(guests), tuple(rules), settings, cluster, taken_at)


def parse_settings(raw: Any, path: str = "settings") -> Settings:
    """Validate a settings object; absent keys take Proxmox's defaults."""
    if not isinstance(raw, dict):
        raise SnapshotError(f"{path}: expected an object, got {raw!r}")
    _refuse_unknown(raw, path, set(Settings.__dataclass_fields__))
    d = Settings()
    return Settings(
        mode=_choice(raw, "mode", path, MODES, d.mode),
        auto_rebalance=_bool(raw, "auto_rebalance", path, d.auto_rebalance),
        threshold=_number(raw, "threshold", path, d.threshold, low=0.0),
        hold_duration=_integer(raw, "hold_duration", path, d.hold_duration),
        margin=_number(raw, "margin", path, d.margin, low=0.0, high=1.0),
        method=_choice(raw, "method", path, METHODS, d.method),
        imbalance_scale=_choice(raw, "imbalance_scale", path, SCALES, d.imbalance_scale),
        rebalance_on_start=_bool(raw, "rebalance_on_start", path, d.rebalance_on_start),
    )


def _parse_node(raw: Any, path: str) -> Node:
    _expect_object(raw, path)
    _refuse_unknown(raw, path, _NODE_KEYS)
    return Node(
        name=_name(raw, "name", path),
        cpus=_number(raw, "cpus", path, _MISSING, low=0.0, exclusive_low=True),
        memory_bytes=_number(raw, "memory_bytes", path, _MISSING, low=0.0, exclusive_low=True),
        online=_bool(raw, "online", path, True),
        maintenance=_bool(raw, "maintenance", path, False),
        cpu_usage=_optional_number(raw, "cpu_usage", path),
        mem_usage_bytes=_optional_number(raw, "mem_usage_bytes", path),
    )


def _parse_guest(raw: Any, path: str, nodes: set[str]) -> Guest:
    _expect_object(raw, path)
    _refuse_unknown(raw, path, _GUEST_KEYS)
    sid = raw.get("sid", _MISSING)
    if sid is _MISSING:
        raise SnapshotError(f"{path}.sid: missing")
    if not isinstance(sid, str) or not SID_PATTERN.match(sid):
        raise SnapshotError(f"{path}.sid: {sid!r} is not 'vm:<id>' or 'ct:<id>'")
    node = _known_node(raw.get("node", _MISSING), f"{path}.node", nodes)
    state = _choice(raw, "state", path, _STATE_NAMES, "started")
    target = raw.get("target")
    if target is not None:
        target = _known_node(target, f"{path}.target", nodes)
    elif state in STATES_ON_TARGET_NODE:
        raise SnapshotError(f"{path}.target: a guest in state {state!r} needs a target node")
    return Guest(
        sid=sid,
        node=node,
        state=state,
        cores=_number(raw, "cores", path, 1.0, low=0.0),
        memory_bytes=_number(raw, "memory_bytes", path, 512.0 * 2**20, low=0.0),
        cpu_usage=_number(raw, "cpu_usage", path, 0.0, low=0.0),
        mem_usage_bytes=_number(raw, "mem_usage_bytes", path, 0.0, low=0.0),
        ha=_bool(raw, "ha", path, True),
        auto_rebalance=_bool(raw, "auto_rebalance", path, True),
        target=target,
        running=_bool(raw, "running", path, True),
    )


def parse_rule(raw: Any, path: str, sids: set[str], nodes: set[str]) -> Rule:
    _expect_object(raw, path)
    rule_id = _name(raw, "id", path)
    kind = _choice(raw, "type", path, ("node-affinity", "resource-affinity"), _MISSING)
    resources = raw.get("resources", _MISSING)
    if not isinstance(resources, list) or not resources:
        raise RuleError(f"{path}.resources: {resources!r} is not a non-empty list of guest sids")
    for i, sid in enumerate(resources):
        if sid not in sids:
            raise RuleError(f"{path}.resources[{i}]: {sid!r} is not a guest of this snapshot")
    if len(set(resources)) != len(resources):
        raise RuleError(f"{path}.resources: {resources!r} lists a guest twice")
    if kind == "node-affinity":
        _refuse_unknown(raw, path, {"id", "type", "resources", "nodes", "strict"})
        return NodeAffinityRule(
            rule_id, tuple(resources), _rule_nodes(raw.get("nodes", _MISSING), f"{path}.nodes", nodes),
            strict=_bool(raw, "strict", path, False),
        )
    _refuse_unknown(raw, path, {"id", "type", "resources", "affinity"})
    if len(resources) < 2:
        raise RuleError(f"{path}.resources: a resource-affinity rule needs at least two guests")
    affinity = _choice(raw, "affinity", path, ("positive", "negative"), _MISSING)
    return ResourceAffinityRule(rule_id, tuple(resources), affinity)


def _rule_nodes(raw: Any, path: str, nodes: set[str]) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, list) or not raw:
        raise RuleError(f"{path}: {raw!r} is not a non-empty list of {{node, priority}}")
    out = []
    for i, entry in enumerate(raw):
        if isinstance(entry, str):  # "node" or "node:priority", as in rules.cfg
            name, _, prio = entry.partition(":")
            entry = {"node": name, "priority": int(prio) if prio.isdigit() else (prio or 0)}
        _expect_object(entry, f"{path}[{i}]")
        name = _known_node(entry.get("node", _MISSING), f"{path}[{i}].node", nodes)
        out.append((name, _integer(entry, "priority", f"{path}[{i}]", 0)))
    _refuse_duplicates([n for n, _ in out], path, "node")
    return tuple(out)


# -- field helpers: each names the key path and the allowed values ----------------


def _expect_object(raw: Any, path: str) -> None:
    if not isinstance(raw, dict):
        raise SnapshotError(f"{path}: expected an object, got {raw!r}")


def _refuse_unknown(raw: dict, path: str, allowed: set[str] | frozenset[str]) -> None:
    if raw.keys() <= allowed:
        return
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SnapshotError(f"{path}.{unknown[0]}: unknown key; allowed: {', '.join(sorted(allowed))}")


def _refuse_duplicates(values: list[str], path: str, key: str) -> None:
    seen: set[str] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise SnapshotError(f"{path}[{i}].{key}: {value!r} appears twice")
        seen.add(value)


def _parse_list(data: dict, key: str, parse_item: Any) -> list:
    raw = data.get(key, [])
    if not isinstance(raw, list):
        raise SnapshotError(f"{key}: expected a list, got {raw!r}")
    return [parse_item(item, f"{key}[{i}]") for i, item in enumerate(raw)]


def _name(raw: dict, key: str, path: str) -> str:
    value = raw.get(key, _MISSING)
    if value is _MISSING:
        raise SnapshotError(f"{path}.{key}: missing")
    if not isinstance(value, str) or not value.strip():
        raise SnapshotError(f"{path}.{key}: {value!r} is not a non-empty string")
    return value


def _known_node(value: Any, path: str, nodes: set[str]) -> str:
    if value is _MISSING:
        raise SnapshotError(f"{path}: missing")
    if value not in nodes:
        raise SnapshotError(f"{path}: {value!r} is not a node of this snapshot")
    return value


def _choice(raw: dict, key: str, path: str, allowed: tuple[str, ...], default: Any) -> Any:
    value = raw.get(key, default)
    if value is _MISSING:
        raise SnapshotError(f"{path}.{key}: missing; allowed: {', '.join(allowed)}")
    if value not in allowed:
        raise SnapshotError(f"{path}.{key}: {value!r} is not one of {', '.join(allowed)}")
    return value


def _bool(raw: dict, key: str, path: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise SnapshotError(f"{path}.{key}: {value!r} is not true or false")
    return value


def _number(raw: dict, key: str, path: str, default: Any, *, low: float | None = None,
            high: float | None = None, exclusive_low: bool = False) -> float:
    value = raw.get(key, default)
    if value is _MISSING:
        raise SnapshotError(f"{path}.{key}: missing")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SnapshotError(f"{path}.{key}: {value!r} is not a finite number")
    if low is not None and (value < low or (exclusive_low and value == low)):
        bound = f"> {low:g}" if exclusive_low else f">= {low:g}"
        raise SnapshotError(f"{path}.{key}: {value!r} is out of range; must be {bound}")
    if high is not None and value > high:
        raise SnapshotError(f"{path}.{key}: {value!r} is out of range; must be <= {high:g}")
    return float(value)


def _optional_number(raw: dict, key: str, path: str) -> float | None:
    if raw.get(key) is None:
        return None
    return _number(raw, key, path, None, low=0.0)


def _integer(raw: dict, key: str, path: str, default: int) -> int:
    value = raw.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SnapshotError(f"{path}.{key}: {value!r} is not a whole number >= 0")
    return value


# -- serialization -----------------------------------------------------------------


def to_dict(snapshot: Snapshot) -> dict:
    """The crs-snapshot/1 form of a snapshot; `parse(to_dict(s)) == s`."""
    s = snapshot.settings
    return {
        "format": FORMAT,
        "cluster": snapshot.cluster,
        "taken_at": snapshot.taken_at,
        "settings": {k: getattr(s, k) for k in Settings.__dataclass_fields__},
        "nodes": [_node_dict(n) for n in snapshot.nodes],
        "guests": [_guest_dict(g) for g in snapshot.guests],
        "rules": [_rule_dict(r) for r in snapshot.rules],
    }


def _node_dict(node: Node) -> dict:
    out = {k: getattr(node, k) for k in Node.__dataclass_fields__}
    return {k: v for k, v in out.items() if v is not None}


def _guest_dict(guest: Guest) -> dict:
    return {k: getattr(guest, k) for k in Guest.__dataclass_fields__}


def _rule_dict(rule: Rule) -> dict:
    if isinstance(rule, NodeAffinityRule):
        return {"id": rule.id, "type": rule.type, "resources": list(rule.resources),
                "nodes": [{"node": n, "priority": p} for n, p in rule.nodes], "strict": rule.strict}
    return {"id": rule.id, "type": rule.type, "resources": list(rule.resources), "affinity": rule.affinity}


def dumps(snapshot: Snapshot) -> str:
    return json.dumps(to_dict(snapshot), indent=2)
