"""Requests and answers checked against Proxmox VE's own API schema (fixtures/pve-api/schema.json).

The schema is the API viewer's (pve-docs `apidoc.js`, reduced by fixtures/pve-api/reduce_apidoc.py).
Its dialect is PVE::JSONSchema's, not JSON Schema's: a property is required unless it says
`optional: 1`; `additionalProperties: 0` refuses unknown keys (absent allows them, as real
answers carry keys the schema leaves out); patterns match the whole value. PVE checks values
as Perl scalars, so a number or integer may come as a numeric string and a boolean as 0/1 or
"1"/"0" (the wire does send `"0.00"` and `"1"`); a string must be a string. `format` names
(pve-node, pve-vmid, …) are Perl routines and are not checked.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "pve-api" / "schema.json"
NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
INTEGER = re.compile(r"[+-]?\d+")
BOOLEAN = re.compile(r"1|0|true|false|yes|no|on|off", re.IGNORECASE)


@functools.cache
def paths() -> dict[str, dict[str, Any]]:
    return json.loads(SCHEMA.read_text())["paths"]


@functools.cache
def endpoint(path: str) -> tuple[str, dict[str, str]] | None:
    """The schema's path for a concrete one ("nodes/node1/tasks" → "/nodes/{node}/tasks") and
    the values of its `{…}` parts; a literal segment wins over a placeholder, as in PVE's router."""
    segments = [s for s in path.strip("/").split("/") if s]

    def match(prefix: str, rest: list[str], values: dict[str, str]) -> tuple[str, dict[str, str]] | None:
        if not rest:
            return (prefix or "/", values) if (prefix or "/") in paths() else None
        literal = f"{prefix}/{rest[0]}"
        if any(p == literal or p.startswith(literal + "/") for p in paths()):
            if found := match(literal, rest[1:], values):
                return found
        for candidate in paths():
            head, _, tail = candidate[len(prefix) + 1 :].partition("/")
            if candidate.startswith(prefix + "/{") and head.endswith("}") and not tail:
                if found := match(f"{prefix}/{head}", rest[1:], values | {head[1:-1]: rest[0]}):
                    return found
        return None

    return match("", segments, {})


def request_errors(method: str, path: str, params: dict[str, Any]) -> list[str]:
    """What in this request Proxmox VE's API does not have: the path, the method, a parameter's
    name, a value outside its type, enum or range, a required parameter left out."""
    found = endpoint(path)
    if found is None:
        return [f"{method} /{path}: no such path in the PVE API"]
    template, values = found
    where = f"{method} {template}"
    info = paths()[template].get(method)
    if info is None:
        return [f"{where}: the PVE API has no {method} here (only {', '.join(paths()[template]) or 'none'})"]
    return errors(info.get("parameters", {"type": "object"}), values | params, where, parameters=True)


def answer_errors(method: str, path: str, data: Any) -> list[str]:
    """Where an answer (the `data` of a 200) departs from the schema's `returns`."""
    found = endpoint(path)
    if found is None or method not in paths()[found[0]]:
        return []  # request_errors says so
    return errors(paths()[found[0]][method].get("returns", {}), data, f"{method} {found[0]} returns")


def errors(schema: dict[str, Any], value: Any, where: str, parameters: bool = False) -> list[str]:
    kind = schema.get("type") or ("object" if parameters else None)
    if kind in (None, "any"):
        return []
    if not _is(kind, value):
        return [f"{where}: {value!r} is not of type {kind}"]
    out: list[str] = []
    if "enum" in schema and str(value) not in [str(v) for v in schema["enum"]]:
        out.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.fullmatch(schema["pattern"], value):
        out.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and float(value) < float(low) or high is not None and float(value) > float(high):
            out.append(f"{where}: {value!r} is outside {low}..{high}")
    if kind == "array" and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out += errors(schema["items"], item, f"{where}[{i}]")
    if kind == "object":
        out += _object_errors(schema, value, where, parameters)
    return out


def _object_errors(schema: dict[str, Any], value: dict[str, Any], where: str, parameters: bool) -> list[str]:
    out: list[str] = []
    properties = schema.get("properties", {})
    for name, sub in properties.items():
        if name in value:
            out += errors(sub, value[name], f"{where}: {'parameter ' if parameters else ''}{name}")
        elif not sub.get("optional") or str(sub.get("optional")) == "0":
            out.append(f"{where}: required {'parameter ' if parameters else ''}{name} is missing")
    extra = schema.get("additionalProperties", 0 if parameters else 1)
    for name in value.keys() - properties.keys():
        if isinstance(extra, dict):
            out += errors(extra, value[name], f"{where}: {name}")
        elif not extra:
            out.append(f"{where}: {'parameter ' if parameters else 'key '}{name!r} is not in the PVE API")
    return out


def _is(kind: str, value: Any) -> bool:
    if kind == "null":
        return value is None
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool) or value in (0, 1) or isinstance(value, str) and bool(BOOLEAN.fullmatch(value))
    if kind == "integer":
        return not isinstance(value, bool) and (
            isinstance(value, int) or isinstance(value, str) and bool(INTEGER.fullmatch(value))
        )
    if kind == "number":
        return not isinstance(value, bool) and (
            isinstance(value, int | float) or isinstance(value, str) and bool(NUMBER.fullmatch(value))
        )
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    raise ValueError(f"{kind!r}: a type the PVE schema dialect does not have")
