"""Reading JSON from people and other tools: the document (`read_json`), then one key of an
object at a time (`Fields`). Every refusal names the key path, the value and what is allowed.

Snapshots and adapter configs use both; the dashboard's settings API and snapshot import
decode their bodies with `read_json`, so what the engine, the database and a browser cannot
hold (NaN, a 400-digit number, NUL, nesting that exhausts the stack, a key given twice) is
refused at the door rather than deep inside with a traceback.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
from typing import Any

import orjson

MISSING: Any = object()  # "no default: the key is required"
LARGEST_INTEGER = 2**53  # beyond it a JSON reader in another language loses digits
SMALLEST_NUMBER = 1e-100  # a number nearer 0 reads as 0: it is float noise, and would underflow in the figures


def read_json(raw: bytes | str, error: type[Exception], where: str = "document") -> Any:
    """The decoded document, or `error` naming the key (or line and column) where it goes wrong.

    orjson refuses NaN, Infinity, numbers beyond a float (a 400-digit integer) and nesting
    deeper than 1024; it keeps the last of duplicate keys, reads an integer beyond 64 bits as a
    float and accepts NUL (which PostgreSQL cannot store), so cheap passes over the text look
    for those, and only when they find something does a slow pass decide and name the key.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise error(_decode_refusal(raw, exc, where)) from None
    if b"\\u0000" in raw and (path := _nul_path(data)) is not None:
        raise error(f"{path or where}: contains a NUL character (\\u0000)")
    if _may_repeat_keys(raw, data) or _TWENTY_DIGITS in raw.translate(_DIGITS_AS_ZERO):
        return _read_exactly(raw, error, where)
    return data


_KEY = re.compile(rb'"((?:[^"\\]|\\.){1,200})"\s*:')
_KEY_BEFORE = re.compile(_KEY.pattern + rb"\s*$")
_TOO_BIG = "number is infinity when parsed as double"


def _decode_refusal(raw: bytes, exc: orjson.JSONDecodeError, where: str) -> str:
    """orjson's reason in the admin's words, at the key whose value it was reading."""
    head = raw[: exc.pos].rstrip(b"[{- \t\r\n")[-300:]
    key = _KEY_BEFORE.search(head)
    place = key.group(1).decode("utf-8", "replace") if key else f"{where} (line {exc.lineno} column {exc.colno})"
    if not key and (keys := _KEY.findall(head)):
        place = f"{place[:-1]}, after the key {keys[-1].decode('utf-8', 'replace')!r})"
    value = raw[exc.pos : exc.pos + 9].lstrip(b"-")
    if exc.msg == _TOO_BIG:
        return f"{place}: number too large; numbers must be finite (at most about 1.8e308)"
    if value.startswith((b"NaN", b"Infinity")):
        return f"{place}: {'NaN' if value.startswith(b'NaN') else 'Infinity'} is not a number; use finite values"
    if "depth" in exc.msg or "recursion" in exc.msg.lower():
        return f"{place}: nested deeper than 1024 levels"
    return f"{place}: not JSON ({exc.msg})"


def _nul_path(value: Any) -> str | None:
    """The path of the first key or string holding NUL, if any (the text may only have `\\\\u0000`)."""
    stack = [(value, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str) and "\0" in value:
            return path
        if isinstance(value, dict):
            for key, item in value.items():
                here = f"{path}.{key}" if path else key
                if "\0" in key:
                    return repr(here)
                stack.append((item, here))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(value))
    return None


def _may_repeat_keys(raw: bytes, data: Any) -> bool:
    """False when no object in `raw` names a key twice, in two C-speed passes.

    Every `:` outside a string follows a key, so `raw` has (keys + colons inside strings)
    colons, and orjson's re-encoding of `data` has (keys kept + colons inside kept strings).
    A repeated key drops one key (and its value's strings), so the counts differ; an escaped
    colon (`\\u003a`) could hide that, so it sends the document to the exact check too.
    """
    return raw.count(b":") != orjson.dumps(data).count(b":") or b"\\u003a" in raw or b"\\u003A" in raw


# a run of 20 digits may be an integer orjson reads as a float (a regex takes 40 times longer)
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_TWENTY_DIGITS = b"0" * 20


def _read_exactly(raw: bytes, error: type[Exception], where: str) -> Any:
    """Python's own decoder: integers stay exact, and a key given twice is refused by name."""

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise error(f"{key}: the key appears twice in one object of the {where}")
            seen.add(key)
        return dict(pairs)

    try:
        return json.loads(raw, object_pairs_hook=pairs_hook)
    except RecursionError:  # orjson allows a little deeper than Python's stack
        raise error(f"{where}: nested too deeply") from None


class Fields:
    """Key readers that raise `error` (a CrsError subclass: SnapshotError, ConfigError)."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def refuse_unknown(self, raw: Any, allowed: set[str] | frozenset[str], where: str) -> dict[str, Any]:
        """`raw` as a dict, provided it names only `allowed` keys: a typo must not fall back to a default."""
        if not isinstance(raw, dict):
            raise self.error(f"{where}: expected an object, got {shown(raw)}")
        if not raw.keys() <= allowed:
            unknown = sorted(set(raw) - allowed)[0]
            raise self.error(f"{where}.{unknown}: unknown key; allowed: {', '.join(sorted(allowed))}")
        return raw

    def number(
        self,
        raw: dict[str, Any],
        key: str,
        where: str,
        default: Any = MISSING,
        *,
        low: float | None = None,
        high: float | None = None,
        exclusive_low: bool = False,
    ) -> float:
        value = self._get(raw, key, where, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise self.error(f"{where}.{key}: {shown(value)} is not a finite number")
        number = 0.0 if abs(value) < SMALLEST_NUMBER else float(value)
        too_low = low is not None and (number < low or (exclusive_low and number == low))
        if too_low or (high is not None and number > high):
            bounds = [f"> {_plain(low)}" if exclusive_low else f">= {_plain(low)}"] if low is not None else []
            bounds += [f"<= {_plain(high)}"] if high is not None else []
            raise self.error(f"{where}.{key}: {shown(value)} is out of range; must be {' and '.join(bounds)}")
        return number

    def optional_number(
        self, raw: dict[str, Any], key: str, where: str, *, low: float | None = None, high: float | None = None
    ) -> float | None:
        return None if raw.get(key) is None else self.number(raw, key, where, low=low, high=high)

    def integer(
        self,
        raw: dict[str, Any],
        key: str,
        where: str,
        default: Any = MISSING,
        *,
        low: int = 0,
        high: int = LARGEST_INTEGER,
    ) -> int:
        value = self._get(raw, key, where, default)
        whole = int(value) if isinstance(value, float) and math.isfinite(value) and value.is_integer() else value
        if isinstance(whole, bool) or not isinstance(whole, int) or not low <= whole <= high:
            raise self.error(f"{where}.{key}: {shown(value)} is not a whole number {low}..{high}")
        return whole

    def text(self, raw: dict[str, Any], key: str, where: str, default: Any = MISSING) -> str:
        value = self._get(raw, key, where, default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{where}.{key}: {shown(value)} is not a non-empty string")
        if "\0" in value:
            raise self.error(f"{where}.{key}: {shown(value)} contains a NUL character")
        return value

    def boolean(self, raw: dict[str, Any], key: str, where: str, default: Any = MISSING) -> bool:
        value = self._get(raw, key, where, default)
        if not isinstance(value, bool):
            raise self.error(f"{where}.{key}: {shown(value)} is not true or false")
        return value

    def choice(
        self, raw: dict[str, Any], key: str, where: str, allowed: tuple[str, ...], default: Any = MISSING
    ) -> Any:
        value = raw.get(key, default)
        if value is MISSING:
            raise self.error(f"{where}.{key}: missing; allowed: {', '.join(allowed)}")
        if value not in allowed:
            raise self.error(f"{where}.{key}: {shown(value)} is not one of {', '.join(allowed)}")
        return value

    def _get(self, raw: dict[str, Any], key: str, where: str, default: Any) -> Any:
        value = raw.get(key, default)
        if value is MISSING:
            raise self.error(f"{where}.{key}: missing")
        return value


def _plain(bound: float) -> str:
    """1048576 rather than 1.04858e+06: a bound is shown exactly."""
    return str(int(bound)) if float(bound).is_integer() else repr(bound)


def _finite(value: int | float) -> bool:
    """Also false for an integer too large for a float (math.isfinite would raise)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


class _Shown(reprlib.Repr):
    """repr for messages: long strings, lists and deep nesting are cut, huge integers described."""

    def __init__(self) -> None:
        super().__init__(maxlevel=3, maxstring=60, maxother=60, maxlist=4, maxdict=4)

    def repr_int(self, x: int, level: int) -> str:
        digits = int(x.bit_length() * math.log10(2)) + 1
        return repr(x) if x.bit_length() < 200 else f"a number of about {digits} digits"


shown = _Shown().repr
