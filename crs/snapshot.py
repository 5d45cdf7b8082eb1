"""The crs-snapshot/1 file contract: parse (validating every key) and serialize.

Validation happens here, once; the rest of the engine trusts a `Snapshot`. Every
refusal names the key path and the offending value, so an admin can fix the file
(reference/snapshot-format.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .errors import RuleError, SnapshotError
from .fields import MISSING, Fields
from .model import (
    METHODS,
    MODES,
    SCALES,
    STATES,
    STATES_ON_TARGET_NODE,
    Guest,
    Node,
    NodeAffinityRule,
    Pressure,
    ResourceAffinityRule,
    Rule,
    Settings,
    Snapshot,
)

FORMAT = "crs-snapshot/1"
SID_PATTERN = re.compile(r"^(vm|ct):[0-9]+$")
_f = Fields(SnapshotError)
_STATE_NAMES = tuple(sorted(STATES))
_GUEST_KEYS = frozenset(Guest.__dataclass_fields__)
_NODE_KEYS = frozenset(Node.__dataclass_fields__)
_PRESSURE_KEYS = tuple(Pressure.__dataclass_fields__)


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
    _f.refuse_unknown(raw, set(Settings.__dataclass_fields__), path)
    d = Settings()
    return Settings(
        mode=_f.choice(raw, "mode", path, MODES, d.mode),
        auto_rebalance=_f.boolean(raw, "auto_rebalance", path, d.auto_rebalance),
        threshold=_f.number(raw, "threshold", path, d.threshold, low=0.0),
        hold_duration=_f.integer(raw, "hold_duration", path, d.hold_duration),
        margin=_f.number(raw, "margin", path, d.margin, low=0.0, high=1.0),
        method=_f.choice(raw, "method", path, METHODS, d.method),
        imbalance_scale=_f.choice(raw, "imbalance_scale", path, SCALES, d.imbalance_scale),
        rebalance_on_start=_f.boolean(raw, "rebalance_on_start", path, d.rebalance_on_start),
    )


def _parse_node(raw: Any, path: str) -> Node:
    _f.refuse_unknown(raw, _NODE_KEYS, path)
    return Node(
        name=_f.text(raw, "name", path),
        cpus=_f.number(raw, "cpus", path, MISSING, low=0.0, exclusive_low=True),
        memory_bytes=_f.number(raw, "memory_bytes", path, MISSING, low=0.0, exclusive_low=True),
        online=_f.boolean(raw, "online", path, True),
        maintenance=_f.boolean(raw, "maintenance", path, False),
        cpu_usage=_f.optional_number(raw, "cpu_usage", path, low=0.0),
        mem_usage_bytes=_f.optional_number(raw, "mem_usage_bytes", path, low=0.0),
        ksm_bytes=_f.number(raw, "ksm_bytes", path, 0.0, low=0.0),
        pressure=_parse_pressure(raw.get("pressure"), f"{path}.pressure"),
        traits=frozenset(_names(raw.get("traits", []), f"{path}.traits")),
    )


def _parse_pressure(raw: Any, path: str) -> Pressure | None:
    """Stall fractions (0.75 = 75 % of the time); absent = the source reports none."""
    if raw is None:
        return None
    _f.refuse_unknown(raw, frozenset(_PRESSURE_KEYS), path)
    return Pressure(**{k: _f.number(raw, k, path, 0.0, low=0.0, high=1.0) for k in _PRESSURE_KEYS})


def _names(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise SnapshotError(f"{path}: {raw!r} is not a list of non-empty strings")
    return raw


def _parse_guest(raw: Any, path: str, nodes: set[str]) -> Guest:
    _f.refuse_unknown(raw, _GUEST_KEYS, path)
    sid = raw.get("sid", MISSING)
    if sid is MISSING:
        raise SnapshotError(f"{path}.sid: missing")
    if not isinstance(sid, str) or not SID_PATTERN.match(sid):
        raise SnapshotError(f"{path}.sid: {sid!r} is not 'vm:<id>' or 'ct:<id>'")
    node = _known_node(raw.get("node", MISSING), f"{path}.node", nodes)
    state = _f.choice(raw, "state", path, _STATE_NAMES, "started")
    target = raw.get("target")
    if target is not None:
        target = _known_node(target, f"{path}.target", nodes)
    elif state in STATES_ON_TARGET_NODE:
        raise SnapshotError(f"{path}.target: a guest in state {state!r} needs a target node")
    return Guest(
        sid=sid,
        node=node,
        state=state,
        cores=_f.number(raw, "cores", path, 1.0, low=0.0),
        memory_bytes=_f.number(raw, "memory_bytes", path, 512.0 * 2**20, low=0.0),
        cpu_usage=_f.number(raw, "cpu_usage", path, 0.0, low=0.0),
        mem_usage_bytes=_f.number(raw, "mem_usage_bytes", path, 0.0, low=0.0),
        ha=_f.boolean(raw, "ha", path, True),
        auto_rebalance=_f.boolean(raw, "auto_rebalance", path, True),
        target=target,
        running=_f.boolean(raw, "running", path, True),
        pressure=_parse_pressure(raw.get("pressure"), f"{path}.pressure"),
        uptime_s=_f.optional_number(raw, "uptime_s", path, low=0.0),
        allowed_nodes=_allowed_nodes(raw.get("allowed_nodes"), f"{path}.allowed_nodes", nodes),
        pinned_reason=_f.text(raw, "pinned_reason", path) if "pinned_reason" in raw else "",
        requires=frozenset(_names(raw.get("requires", []), f"{path}.requires")),
        recoverable=_f.boolean(raw, "recoverable", path, True),
    )


def _allowed_nodes(raw: Any, path: str, nodes: set[str]) -> frozenset[str] | None:
    if raw is None:
        return None
    return frozenset(_known_node(n, f"{path}[{i}]", nodes) for i, n in enumerate(_names(raw, path)))


def parse_rule(raw: Any, path: str, sids: set[str], nodes: set[str]) -> Rule:
    _f.refuse_unknown(raw, {"id", "type", "resources", "nodes", "strict", "affinity"}, path)
    rule_id = _f.text(raw, "id", path)
    kind = _f.choice(raw, "type", path, ("node-affinity", "resource-affinity"), MISSING)
    resources = raw.get("resources", MISSING)
    if not isinstance(resources, list) or not resources:
        raise RuleError(f"{path}.resources: {resources!r} is not a non-empty list of guest sids")
    for i, sid in enumerate(resources):
        if sid not in sids:
            raise RuleError(f"{path}.resources[{i}]: {sid!r} is not a guest of this snapshot")
    if len(set(resources)) != len(resources):
        raise RuleError(f"{path}.resources: {resources!r} lists a guest twice")
    affinity = _f.choice(
        raw, "affinity", path, ("positive", "negative"), "positive" if kind == "node-affinity" else MISSING
    )
    if kind == "node-affinity":
        _f.refuse_unknown(raw, {"id", "type", "resources", "nodes", "strict", "affinity"}, path)
        rule_nodes = _rule_nodes(raw.get("nodes", MISSING), f"{path}.nodes", nodes)
        if affinity == "negative" and any(priority for _, priority in rule_nodes):
            raise RuleError(f"{path}.nodes: a negative node-affinity rule takes no priorities")
        return NodeAffinityRule(
            rule_id, tuple(resources), rule_nodes, strict=_f.boolean(raw, "strict", path, False), affinity=affinity
        )
    _f.refuse_unknown(raw, {"id", "type", "resources", "affinity"}, path)
    if len(resources) < 2:
        raise RuleError(f"{path}.resources: a resource-affinity rule needs at least two guests")
    return ResourceAffinityRule(rule_id, tuple(resources), affinity)


def _rule_nodes(raw: Any, path: str, nodes: set[str]) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, list) or not raw:
        raise RuleError(f"{path}: {raw!r} is not a non-empty list of {{node, priority}}")
    out = []
    for i, entry in enumerate(raw):
        if isinstance(entry, str):  # "node" or "node:priority", as in rules.cfg
            name, _, prio = entry.partition(":")
            entry = {"node": name, "priority": int(prio) if prio.isdigit() else (prio or 0)}
        _f.refuse_unknown(entry, {"node", "priority"}, f"{path}[{i}]")
        name = _known_node(entry.get("node", MISSING), f"{path}[{i}].node", nodes)
        out.append((name, _f.integer(entry, "priority", f"{path}[{i}]", 0)))
    _refuse_duplicates([n for n, _ in out], path, "node")
    return tuple(out)


# -- helpers ----------------------------------------------------------------------


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


def _known_node(value: Any, path: str, nodes: set[str]) -> str:
    if value is MISSING:
        raise SnapshotError(f"{path}: missing")
    if value not in nodes:
        raise SnapshotError(f"{path}: {value!r} is not a node of this snapshot")
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


# Keys written only when they say something: files without them keep their old meaning.
_OPTIONAL_KEYS = frozenset(
    {"ksm_bytes", "pressure", "traits", "uptime_s", "allowed_nodes", "pinned_reason", "requires", "recoverable"}
)


def _node_dict(node: Node) -> dict:
    out = {k: _json_value(getattr(node, k)) for k in Node.__dataclass_fields__ if _says_something(node, k)}
    return {k: v for k, v in out.items() if v is not None}


def _guest_dict(guest: Guest) -> dict:
    return {k: _json_value(getattr(guest, k)) for k in Guest.__dataclass_fields__ if _says_something(guest, k)}


def _says_something(item: Node | Guest, key: str) -> bool:
    return key not in _OPTIONAL_KEYS or getattr(item, key) != type(item).__dataclass_fields__[key].default


def _json_value(value: Any) -> Any:
    if isinstance(value, Pressure):
        return {k: getattr(value, k) for k in _PRESSURE_KEYS}
    if isinstance(value, frozenset):
        return sorted(value)
    return value


def _rule_dict(rule: Rule) -> dict:
    if isinstance(rule, NodeAffinityRule):
        return {
            "id": rule.id,
            "type": rule.type,
            "resources": list(rule.resources),
            "nodes": [{"node": n, "priority": p} for n, p in rule.nodes],
            "strict": rule.strict,
            "affinity": rule.affinity,
        }
    return {"id": rule.id, "type": rule.type, "resources": list(rule.resources), "affinity": rule.affinity}


def dumps(snapshot: Snapshot) -> str:
    return json.dumps(to_dict(snapshot), indent=2)
