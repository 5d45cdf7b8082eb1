"""Reading one key of a JSON object: checked once, and every refusal names the key path,
the value and what is allowed.

Snapshots, adapter configs and the web side's forms all take JSON from people and other
tools; they share these readers, each raising its own error type.
"""

from __future__ import annotations

import math
from typing import Any

MISSING: Any = object()  # "no default: the key is required"


class Fields:
    """Key readers that raise `error` (a CrsError or SourceError subclass)."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def refuse_unknown(self, raw: Any, allowed: set[str] | frozenset[str], where: str) -> dict:
        """`raw` as a dict, provided it names only `allowed` keys: a typo must not fall back to a default."""
        if not isinstance(raw, dict):
            raise self.error(f"{where}: expected an object, got {raw!r}")
        if not raw.keys() <= allowed:
            unknown = sorted(set(raw) - allowed)[0]
            raise self.error(f"{where}.{unknown}: unknown key; allowed: {', '.join(sorted(allowed))}")
        return raw

    def number(
        self,
        raw: dict,
        key: str,
        where: str,
        default: Any = MISSING,
        *,
        low: float | None = None,
        high: float | None = None,
        exclusive_low: bool = False,
    ) -> float:
        value = self._get(raw, key, where, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(f"{where}.{key}: {value!r} is not a finite number")
        too_low = low is not None and (value < low or (exclusive_low and value == low))
        if too_low or (high is not None and value > high):
            bounds = [f"> {low:g}" if exclusive_low else f">= {low:g}"] if low is not None else []
            bounds += [f"<= {high:g}"] if high is not None else []
            raise self.error(f"{where}.{key}: {value!r} is out of range; must be {' and '.join(bounds)}")
        return float(value)

    def optional_number(self, raw: dict, key: str, where: str, *, low: float | None = None) -> float | None:
        return None if raw.get(key) is None else self.number(raw, key, where, low=low)

    def integer(
        self, raw: dict, key: str, where: str, default: Any = MISSING, *, low: int = 0, high: int | None = None
    ) -> int:
        value = self._get(raw, key, where, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            allowed = f"{low}..{high}" if high is not None else f">= {low}"
            raise self.error(f"{where}.{key}: {value!r} is not a whole number {allowed}")
        return value

    def text(self, raw: dict, key: str, where: str, default: Any = MISSING) -> str:
        value = self._get(raw, key, where, default)
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{where}.{key}: {value!r} is not a non-empty string")
        return value

    def boolean(self, raw: dict, key: str, where: str, default: Any = MISSING) -> bool:
        value = self._get(raw, key, where, default)
        if not isinstance(value, bool):
            raise self.error(f"{where}.{key}: {value!r} is not true or false")
        return value

    def choice(self, raw: dict, key: str, where: str, allowed: tuple[str, ...], default: Any = MISSING) -> Any:
        value = raw.get(key, default)
        if value is MISSING:
            raise self.error(f"{where}.{key}: missing; allowed: {', '.join(allowed)}")
        if value not in allowed:
            raise self.error(f"{where}.{key}: {value!r} is not one of {', '.join(allowed)}")
        return value

    def _get(self, raw: dict, key: str, where: str, default: Any) -> Any:
        value = raw.get(key, default)
        if value is MISSING:
            raise self.error(f"{where}.{key}: missing")
        return value
