"""The crs-snapshot/1 file contract: parse (validating every key) and serialize.

Validation happens here, once; the rest of the engine trusts a `Snapshot`. Every
refusal names the key path and the offending value, so an admin can fix the file
(reference/snapshot-format.md).
"""

from __future__ import annotations

import json
import re
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np

from .errors import RuleError, SnapshotError
from .fields import MISSING, SMALLEST_NUMBER, Fields, read_json, shown
from .model import (
    CONTAINERS,
    FORECAST_USES,
    METHODS,
    MODES,
    OBJECTIVES,
    PRESETS,
    PRODUCT,
    PROXMOX,
    SCALES,
    STATES,
    STATES_ON_TARGET_NODE,
    Forecast,
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
SID_PATTERN = re.compile(r"(vm|ct):[0-9]{1,9}")  # Proxmox VMIDs are 100..999999999
# Bounds (docs/snapshot-format.md): with them every load, imbalance and gain the engine
# computes is finite, so a figure is never NaN or infinite.
MAX_CPUS = 2**20  # node CPUs, guest cores and CPU usage, in cores
MAX_BYTES = 2**60  # memory sizes and usage
MIN_NODE_CPUS = 0.01  # a node's capacity divides its load
MIN_NODE_BYTES = 2**20
MAX_USAGE_PERIOD_S = 86400.0  # Proxmox's RRD keeps 1-minute rows for a day
_f = Fields(SnapshotError)
# (key, default, high) of the guests' numbers, for both guest readers
_GUEST_NUMBERS = (
    ("cores", 1.0, MAX_CPUS),
    ("memory_bytes", 512.0 * 2**20, MAX_BYTES),
    ("cpu_usage", 0.0, MAX_CPUS),
    ("mem_usage_bytes", 0.0, MAX_BYTES),
)
_GUEST_FLAGS = (("ha", True), ("auto_rebalance", True), ("running", True))
_FAST_GUEST_KEYS = frozenset({"sid", "node", "state", "target"} | {k for k, *_ in _GUEST_NUMBERS + _GUEST_FLAGS})
# The array passes build guests from Guest's leading fields; the optional keys after them
# (pressure, allowed_nodes, …) keep their defaults, and a guest that names one is read alone.
_GUEST_FIELDS = tuple(Guest.__dataclass_fields__)[: len(_FAST_GUEST_KEYS)]
_STATE_NAMES = tuple(sorted(STATES))
_GUEST_KEYS = frozenset(Guest.__dataclass_fields__)
_NODE_KEYS = frozenset(Node.__dataclass_fields__)
_PRESSURE_KEYS = tuple(Pressure.__dataclass_fields__)
_FORECAST_KEYS = frozenset(Forecast.__dataclass_fields__)
HOUR_S = 3600.0  # a forecast looks an hour ahead


def load_file(path: str | Path) -> Snapshot:
    """Read and validate a snapshot file."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read ({exc.strerror})") from exc
    return parse(read_json(raw, SnapshotError, str(path)))


def parse(data: Any) -> Snapshot:
    """Turn decoded JSON into a `Snapshot`, or raise naming the first bad key."""
    if not isinstance(data, dict):
        raise SnapshotError(f"snapshot: expected an object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise SnapshotError(f"format: {shown(data.get('format'))} is not supported; use {FORMAT!r}")
    settings = parse_settings(data.get("settings", {}), "settings")
    nodes = _parse_list(data, "nodes", _parse_node)
    if not nodes:
        raise SnapshotError("nodes: a snapshot needs at least one node")
    _refuse_duplicates([n.name for n in nodes], "nodes", "name")
    node_names = {n.name for n in nodes}
    guests = _guests_in_array_passes(data.get("guests", []), node_names)
    if guests is None:  # something is wrong: the per-guest reader names it
        guests = _parse_list(data, "guests", lambda g, p: _parse_guest(g, p, node_names))
    _refuse_duplicates([g.sid for g in guests], "guests", "sid")
    sids = {g.sid for g in guests}
    rules = _parse_list(data, "rules", lambda r, p: parse_rule(r, p, sids, node_names))
    _refuse_duplicates([r.id for r in rules], "rules", "id")
    cluster = data.get("cluster", "")
    if not isinstance(cluster, str) or "\0" in cluster:
        raise SnapshotError(f"cluster: {shown(cluster)} is not a string without NUL")
    taken_at = data.get("taken_at")
    if taken_at is not None and (not isinstance(taken_at, str) or "\0" in taken_at):
        raise SnapshotError(f"taken_at: {shown(taken_at)} is not a timestamp string")
    clock_s = _f.optional_number(data, "clock_s", "snapshot", low=0.0, high=MAX_BYTES)
    return Snapshot(tuple(nodes), tuple(guests), tuple(rules), settings, cluster, taken_at, clock_s)


def parse_settings(raw: Any, path: str = "settings") -> Settings:
    """Validate a settings object; absent keys take the preset's values (`proxmox` when
    `preset` is absent too, so older files keep Proxmox's answers)."""
    if not isinstance(raw, dict):
        raise SnapshotError(f"{path}: expected an object, got {shown(raw)}")
    _f.refuse_unknown(raw, set(Settings.__dataclass_fields__), path)
    preset = _f.choice(raw, "preset", path, PRESETS, "proxmox")
    d = PRODUCT if preset == "product" else PROXMOX
    threshold = _f.number(raw, "threshold", path, d.threshold, low=0.0)
    if "target_imbalance" not in raw:  # the preset's target, where it is below this threshold
        target = d.target_imbalance if d.target_imbalance is not None and d.target_imbalance <= threshold else None
    elif raw["target_imbalance"] is None:  # explicitly: the threshold
        target = None
    else:
        target = _f.number(raw, "target_imbalance", path, low=0.0, high=threshold)
    objective = _f.choice(raw, "objective", path, OBJECTIVES, d.objective)
    return Settings(
        mode=_f.choice(raw, "mode", path, MODES, d.mode),
        auto_rebalance=_f.boolean(raw, "auto_rebalance", path, d.auto_rebalance),
        threshold=threshold,
        hold_duration=_f.integer(raw, "hold_duration", path, d.hold_duration),
        margin=_f.number(raw, "margin", path, d.margin, low=0.0, high=1.0),
        method=_f.choice(raw, "method", path, METHODS, d.method),
        imbalance_scale=_f.choice(raw, "imbalance_scale", path, SCALES, d.imbalance_scale),
        rebalance_on_start=_f.boolean(raw, "rebalance_on_start", path, d.rebalance_on_start),
        preset=preset,
        moves_per_round=_f.integer(raw, "moves_per_round", path, d.moves_per_round, low=1),
        target_imbalance=target,
        load_floor=_f.number(raw, "load_floor", path, d.load_floor, low=0.0, high=1.0),
        objective=objective,
        cpu_overcommit=_f.number(raw, "cpu_overcommit", path, d.cpu_overcommit, low=0.0, exclusive_low=True),
        memory_reserve_bytes=_f.number(raw, "memory_reserve_bytes", path, d.memory_reserve_bytes, low=0.0),
        usage_period=_f.number(raw, "usage_period", path, d.usage_period, low=0.0, high=MAX_USAGE_PERIOD_S),
        containers=_f.choice(raw, "containers", path, CONTAINERS, d.containers),
        forecast=_f.choice(raw, "forecast", path, FORECAST_USES, d.forecast),
        round_interval_s=_f.number(raw, "round_interval_s", path, d.round_interval_s, low=0.0, exclusive_low=True),
        migration_mib_s=_f.number(raw, "migration_mib_s", path, d.migration_mib_s, low=0.0, exclusive_low=True),
        benefit_horizon=_f.number(raw, "benefit_horizon", path, d.benefit_horizon, low=0.0, exclusive_low=True),
        minimum_dwell=_f.number(raw, "minimum_dwell", path, d.minimum_dwell, low=0.0),
    )


def _parse_node(raw: Any, path: str) -> Node:
    _f.refuse_unknown(raw, _NODE_KEYS, path)
    return Node(
        name=_f.text(raw, "name", path),
        cpus=_f.number(raw, "cpus", path, MISSING, low=MIN_NODE_CPUS, high=MAX_CPUS),
        memory_bytes=_f.number(raw, "memory_bytes", path, MISSING, low=MIN_NODE_BYTES, high=MAX_BYTES),
        online=_f.boolean(raw, "online", path, True),
        maintenance=_f.boolean(raw, "maintenance", path, False),
        cpu_usage=_f.optional_number(raw, "cpu_usage", path, low=0.0, high=MAX_CPUS),
        mem_usage_bytes=_f.optional_number(raw, "mem_usage_bytes", path, low=0.0, high=MAX_BYTES),
        ksm_bytes=_f.number(raw, "ksm_bytes", path, 0.0, low=0.0, high=MAX_BYTES),
        pressure=_parse_pressure(raw.get("pressure"), f"{path}.pressure"),
        traits=frozenset(_names(raw.get("traits", []), f"{path}.traits")),
        standby=_f.boolean(raw, "standby", path, False),
        uptime_s=_f.optional_number(raw, "uptime_s", path, low=0.0, high=MAX_BYTES),
    )


def _parse_pressure(raw: Any, path: str) -> Pressure | None:
    """Stall fractions (0.75 = 75 % of the time); absent = the source reports none."""
    if raw is None:
        return None
    _f.refuse_unknown(raw, frozenset(_PRESSURE_KEYS), path)
    return Pressure(**{k: _f.number(raw, k, path, 0.0, low=0.0, high=1.0) for k in _PRESSURE_KEYS})


def _parse_forecast(raw: Any, path: str) -> Forecast | None:
    """A guest's next-hour peak; absent = not forecast (the round is reactive for it)."""
    if raw is None:
        return None
    _f.refuse_unknown(raw, _FORECAST_KEYS, path)
    days = _f.integer(raw, "days", path, low=1)
    acted = _f.integer(raw, "acted", path, 0, low=0)
    return Forecast(
        cpu=_f.number(raw, "cpu", path, low=0.0, high=MAX_CPUS),
        memory_bytes=_f.number(raw, "memory_bytes", path, low=0.0, high=MAX_BYTES),
        at_s=_f.number(raw, "at_s", path, low=0.0, high=HOUR_S),
        seen=_f.integer(raw, "seen", path, low=0, high=days),
        days=days,
        acted=acted,
        within=_f.integer(raw, "within", path, 0, low=0, high=acted),
    )


def _names(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise SnapshotError(f"{path}: {raw!r} is not a list of non-empty strings")
    return raw


def _parse_guest(raw: Any, path: str, nodes: set[str]) -> Guest:
    _f.refuse_unknown(raw, _GUEST_KEYS, path)
    sid = raw.get("sid", MISSING)
    if sid is MISSING:
        raise SnapshotError(f"{path}.sid: missing")
    if not isinstance(sid, str) or not SID_PATTERN.fullmatch(sid):
        raise SnapshotError(f"{path}.sid: {shown(sid)} is not 'vm:<id>' or 'ct:<id>' (id up to 9 digits)")
    node = _known_node(raw.get("node", MISSING), f"{path}.node", nodes)
    state = _f.choice(raw, "state", path, _STATE_NAMES, "started")
    target = raw.get("target")
    if target is not None:
        target = _known_node(target, f"{path}.target", nodes)
    elif state in STATES_ON_TARGET_NODE:
        raise SnapshotError(f"{path}.target: a guest in state {state!r} needs a target node")
    values: dict[str, Any] = {"sid": sid, "node": node, "state": state, "target": target}
    values |= {key: _f.number(raw, key, path, default, low=0.0, high=high) for key, default, high in _GUEST_NUMBERS}
    values |= {key: _f.boolean(raw, key, path, default) for key, default in _GUEST_FLAGS}
    values |= {
        "pressure": _parse_pressure(raw.get("pressure"), f"{path}.pressure"),
        "uptime_s": _f.optional_number(raw, "uptime_s", path, low=0.0, high=MAX_BYTES),
        "allowed_nodes": _allowed_nodes(raw.get("allowed_nodes"), f"{path}.allowed_nodes", nodes),
        "pinned_reason": _f.text(raw, "pinned_reason", path) if "pinned_reason" in raw else "",
        "requires": frozenset(_names(raw.get("requires", []), f"{path}.requires")),
        "recoverable": _f.boolean(raw, "recoverable", path, True),
        "proxmox_ha": _f.boolean(raw, "proxmox_ha", path, False),
        "forecast": _parse_forecast(raw.get("forecast"), f"{path}.forecast"),
        "lock": _f.text(raw, "lock", path) if "lock" in raw else "",
    }
    return Guest(**values)


# -- the guests in array passes ----------------------------------------------------------


def _guests_in_array_passes(raw: Any, nodes: set[str]) -> list[Guest] | None:
    """The guests, when every one passes `_parse_guest`'s checks, run key by key over all
    guests at once in C-speed passes (map, set, NumPy), which reads 20 000 guests in a
    fraction of the per-guest time; None at the first doubt, so that the per-guest reader
    finds the guest and names its key."""
    if set(_GUEST_FIELDS) != _FAST_GUEST_KEYS or hasattr(Guest, "__post_init__"):  # Guest changed: one by one
        return None
    if not isinstance(raw, list) or not _types(raw) <= {dict} or not all(map(_FAST_GUEST_KEYS.issuperset, raw)):
        return None
    columns = {"sid": _column(raw, "sid", None)}
    if not _types(columns["sid"]) <= {str} or not all(map(SID_PATTERN.fullmatch, columns["sid"])):
        return None
    columns["node"], columns["state"] = _column(raw, "node", None), _column(raw, "state", "started")
    columns["target"] = _column(raw, "target", None)
    moving_to = [t for t in columns["target"] if t is not None]
    if not (_all_in(columns["node"], nodes) and _all_in(columns["state"], STATES) and _all_in(moving_to, nodes)):
        return None
    if any(t is None and s in STATES_ON_TARGET_NODE for s, t in zip(columns["state"], columns["target"])):
        return None
    for key, default, high in _GUEST_NUMBERS:
        values = _column(raw, key, default)
        if not _types(values) <= {int, float}:
            return None
        try:
            array = np.array(values, dtype=np.float64)
        except OverflowError:
            return None
        if not (np.isfinite(array).all() and (array >= 0.0).all() and (array <= high).all()):
            return None
        array[array < SMALLEST_NUMBER] = 0.0
        columns[key] = array.tolist()
    for key, default in _GUEST_FLAGS:
        columns[key] = _column(raw, key, default)
        if not _types(columns[key]) <= {bool}:
            return None
    return _guests_field_by_field(columns, len(raw))


def _guests_field_by_field(columns: dict[str, list[Any]], count: int) -> list[Guest]:
    """`Guest`s equal to `Guest(**fields)` (the absent fields at their defaults), filled one
    field over all guests at a time through the slots' setters: Guest's own `__init__` sets
    its 18 frozen fields with one `object.__setattr__` call each, which was half of reading
    20 000 guests. Guest has no `__post_init__`, so nothing is skipped."""
    guests: list[Guest] = list(map(object.__new__, repeat(Guest, count)))
    for name, field in Guest.__dataclass_fields__.items():
        values = columns[name] if name in columns else repeat(field.default, count)
        list(map(getattr(Guest, name).__set__, guests, values))
    return guests


def _column(raw: list[dict[str, Any]], key: str, default: Any) -> list[Any]:
    return list(map(dict.get, raw, repeat(key), repeat(default)))


def _types(values: list[Any]) -> set[type]:
    return set(map(type, values))


def _all_in(values: list[Any], allowed: set[str] | frozenset[str]) -> bool:
    return _types(values) <= {str} and set(values) <= allowed


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
        raise RuleError(f"{path}.resources: {shown(resources)} is not a non-empty list of guest sids")
    for i, sid in enumerate(resources):
        if not isinstance(sid, str) or sid not in sids:
            raise RuleError(f"{path}.resources[{i}]: {shown(sid)} is not a guest of this snapshot")
    if len(set(resources)) != len(resources):
        raise RuleError(f"{path}.resources: {shown(resources)} lists a guest twice")
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


_PRIORITY = re.compile(r"[0-9]{1,16}")  # longer: refused by the priority's range, not int()'s digit limit


def _rule_nodes(raw: Any, path: str, nodes: set[str]) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, list) or not raw:
        raise RuleError(f"{path}: {shown(raw)} is not a non-empty list of {{node, priority}}")
    out = []
    for i, entry in enumerate(raw):
        if isinstance(entry, str):  # "node" or "node:priority", as in rules.cfg
            name, _, prio = entry.partition(":")
            entry = {"node": name, "priority": int(prio) if _PRIORITY.fullmatch(prio) else (prio or 0)}
        _f.refuse_unknown(entry, {"node", "priority"}, f"{path}[{i}]")
        name = _known_node(entry.get("node", MISSING), f"{path}[{i}].node", nodes)
        out.append((name, _f.integer(entry, "priority", f"{path}[{i}]", 0)))
    _refuse_duplicates([n for n, _ in out], path, "node")
    return tuple(out)


# -- helpers ----------------------------------------------------------------------


def _refuse_duplicates(values: list[str], path: str, key: str) -> None:
    if len(set(values)) == len(values):
        return
    seen: set[str] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise SnapshotError(f"{path}[{i}].{key}: {value!r} appears twice")
        seen.add(value)


def _parse_list(data: dict[str, Any], key: str, parse_item: Any) -> list[Any]:
    raw = data.get(key, [])
    if not isinstance(raw, list):
        raise SnapshotError(f"{key}: expected a list, got {shown(raw)}")
    return [parse_item(item, f"{key}[{i}]") for i, item in enumerate(raw)]


def _known_node(value: Any, path: str, nodes: set[str]) -> str:
    if value is MISSING:
        raise SnapshotError(f"{path}: missing")
    if not isinstance(value, str) or value not in nodes:
        raise SnapshotError(f"{path}: {shown(value)} is not a node of this snapshot")
    return value


# -- serialization -----------------------------------------------------------------


def to_dict(snapshot: Snapshot) -> dict[str, Any]:
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
    } | ({} if snapshot.clock_s is None else {"clock_s": snapshot.clock_s})


# Keys written only when they say something: files without them keep their old meaning.
_OPTIONAL_KEYS = frozenset(
    {
        "ksm_bytes",
        "standby",
        "pressure",
        "traits",
        "uptime_s",
        "allowed_nodes",
        "pinned_reason",
        "requires",
        "recoverable",
        "proxmox_ha",
        "forecast",
        "lock",
    }
)


def _node_dict(node: Node) -> dict[str, Any]:
    out = {k: _json_value(getattr(node, k)) for k in Node.__dataclass_fields__ if _says_something(node, k)}
    return {k: v for k, v in out.items() if v is not None}


def _guest_dict(guest: Guest) -> dict[str, Any]:
    return {k: _json_value(getattr(guest, k)) for k in Guest.__dataclass_fields__ if _says_something(guest, k)}


def _says_something(item: Node | Guest, key: str) -> bool:
    return key not in _OPTIONAL_KEYS or getattr(item, key) != type(item).__dataclass_fields__[key].default


def _json_value(value: Any) -> Any:
    if isinstance(value, Pressure):
        return {k: getattr(value, k) for k in _PRESSURE_KEYS}
    if isinstance(value, Forecast):
        return {k: getattr(value, k) for k in Forecast.__dataclass_fields__}
    if isinstance(value, frozenset):
        return sorted(value)
    return value


def _rule_dict(rule: Rule) -> dict[str, Any]:
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
