"""Reading an adapter's configuration: every key checked once, every refusal named.

Configs come from the dashboard's cluster settings or the command line as plain
JSON objects. A typo must not silently fall back to a default, so unknown keys are
refused too, with the list of allowed ones.
"""

from __future__ import annotations

import math
from typing import Any

from .base import SourceError

_MISSING = object()


class ConfigError(SourceError):
    """Raised when an adapter config has a missing, unknown, mistyped or out-of-range key."""


def refuse_unknown(config: Any, allowed: set[str], where: str) -> dict:
    """The config as a dict, provided it names only `allowed` keys."""
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: expected an object of settings, got {config!r}")
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(sorted(allowed))}")
    return config


def number(config: dict, key: str, where: str, default: float, *, low: float,
           high: float = math.inf, exclusive_low: bool = False) -> float:
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where}.{key}: {value!r} is not a finite number")
    if value < low or (exclusive_low and value == low) or value > high:
        low_text = f"> {low:g}" if exclusive_low else f">= {low:g}"
        high_text = f" and <= {high:g}" if high != math.inf else ""
        raise ConfigError(f"{where}.{key}: {value!r} is out of range; must be {low_text}{high_text}")
    return float(value)


def integer(config: dict, key: str, where: str, default: int, *, low: int,
            high: int | None = None) -> int:
    value = config.get(key, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        allowed = f"{low}..{high}" if high is not None else f">= {low}"
        raise ConfigError(f"{where}.{key}: {value!r} is not a whole number {allowed}")
    return value


def text(config: dict, key: str, where: str, default: Any = _MISSING) -> str:
    value = config.get(key, default)
    if value is _MISSING:
        raise ConfigError(f"{where}.{key}: missing")
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{key}: {value!r} is not a non-empty string")
    return value


def boolean(config: dict, key: str, where: str, default: bool) -> bool:
    value = config.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key}: {value!r} is not true or false")
    return value


def choice(config: dict, key: str, where: str, allowed: tuple[str, ...], default: str) -> str:
    value = config.get(key, default)
    if value not in allowed:
        raise ConfigError(f"{where}.{key}: {value!r} is not one of {', '.join(allowed)}")
    return value
