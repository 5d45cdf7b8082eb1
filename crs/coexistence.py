"""Proxmox's own balancer, read from the datacenter's `crs` option, so two balancers never fight.

Since pve-ha-manager 5.2.0 Proxmox VE can rebalance HA guests itself (`ha-auto-rebalance`).
If it does and this product also moves guests automatically, each undoes the other's moves:
the complaint peers hear most. So the page shows Proxmox's settings beside ours, and
automatic execution here is refused while Proxmox's is on (recommendations are still shown).

`GET /cluster/options` returns `crs` as a property string, e.g.
`ha=dynamic,ha-auto-rebalance=1,ha-auto-rebalance-threshold=30`. Threshold and margin were
fractions (default 0.3 and 0.1) in pve-cluster before d8b4d02 (2026-05-17) and percent
(0–100, default 30 and 10) since; the answer does not say which. A value above 1 can only
be percent (a fraction threshold above 1 is never reached on the clamped imbalance, and a
margin above 1 would need a gain over 100 %); 1 or below is read as a fraction, as a
percent threshold of at most 1 % makes no sense either. The stored text is kept beside the
reading so the page can show both.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

DEFAULTS = {"threshold": 0.3, "margin": 0.1, "hold_duration": 3.0}  # Proxmox's, as fractions and rounds


@dataclass(frozen=True, slots=True)
class ProxmoxBalancer:
    """The datacenter's CRS settings, threshold and margin as fractions (this product's unit)."""

    mode: str  # basic | static | dynamic
    rebalance_on_start: bool
    auto_rebalance: bool  # ha-auto-rebalance: Proxmox moves HA guests by itself
    threshold: float
    margin: float
    hold_duration: float  # HA rounds (about 10 s each)
    method: str  # bruteforce | topsis
    unit: str  # how threshold and margin were stored: "percent", "fraction", or "default" (not set)
    raw: str  # the `crs` property string as Proxmox returned it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def rebalancing(self) -> bool:
        """Whether Proxmox moves guests on its own: auto-rebalance is on and the mode is not basic
        (the manager ignores auto-rebalance in basic mode)."""
        return self.auto_rebalance and self.mode != "basic"


def _flag(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def _number(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def parse_crs(value: object) -> ProxmoxBalancer:
    """Read the `crs` property string (or its already-split dict form); anything unreadable is
    taken as Proxmox's default, as Proxmox itself does for a key it does not know."""
    if isinstance(value, dict):
        pairs = {str(k): str(v) for k, v in value.items()}
        raw = ",".join(f"{k}={v}" for k, v in pairs.items())
    else:
        raw = value if isinstance(value, str) else ""
        pairs = {}
        for part in raw.split(","):
            key, sep, item = part.partition("=")
            if sep:
                pairs[key.strip()] = item.strip()
            elif key.strip():
                pairs["ha"] = key.strip()  # the default key, as PVE's property strings allow
    threshold = _number(pairs.get("ha-auto-rebalance-threshold"))
    margin = _number(pairs.get("ha-auto-rebalance-margin"))
    stored = [v for v in (threshold, margin) if v is not None]
    unit = "default" if not stored else ("percent" if any(v > 1 for v in stored) else "fraction")
    scale = 100.0 if unit == "percent" else 1.0
    hold = _number(pairs.get("ha-auto-rebalance-hold-duration"))
    return ProxmoxBalancer(
        mode=pairs.get("ha", "basic") or "basic",
        rebalance_on_start=_flag(pairs.get("ha-rebalance-on-start", "0")),
        auto_rebalance=_flag(pairs.get("ha-auto-rebalance", "0")),
        threshold=DEFAULTS["threshold"] if threshold is None else threshold / scale,
        margin=DEFAULTS["margin"] if margin is None else margin / scale,
        hold_duration=DEFAULTS["hold_duration"] if hold is None else hold,
        method=pairs.get("ha-auto-rebalance-method", "bruteforce") or "bruteforce",
        unit=unit,
        raw=raw,
    )
