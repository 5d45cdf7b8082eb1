"""How often a collect reads what changes slowly, kept in the source's state between collects.

A collect reads `/cluster/resources` and the metrics export every time; the guests' pressure
lists and a node's RRD (its pressure), the HA manager's state and `/cluster/options` at most
once a minute (the config's `slow_reads_s`), each node's in its own part of the minute so
that no collect reads them all; a VM's migrate pre-check is kept an hour. What a read
answered is kept with when it is due again, in a small JSON object, so the next collect (in
any worker) uses it until then.
"""

from __future__ import annotations

import copy
from typing import Any

SLOW_READS_S = 60.0  # pressure lists, a node's RRD, HA state, cluster/options (the config's slow_reads_s)
EXPORT_RETRY_S = 3600.0  # a cluster without the metrics export is asked again after this


class Cadence:
    """What slow reads answered and when each is due again: {key: {"due": t, "value": …}}."""

    def __init__(self, state: dict[str, Any] | None):
        self.state: dict[str, dict[str, Any]] = copy.deepcopy(state or {})

    def due(self, key: str, now: float) -> bool:
        return bool(now >= self.state.get(key, {}).get("due", float("-inf")))

    def kept(self, key: str, default: Any = None) -> Any:
        return self.state.get(key, {}).get("value", default)

    def keep(self, key: str, value: Any, due: float) -> None:
        self.state[key] = {"due": due, "value": value}

    def nodes_due(self, nodes: list[str], now: float) -> list[str]:
        """The online nodes whose pressure is due; a node no longer online is forgotten."""
        for gone in [k for k in self.state if k.startswith("node:") and k[5:] not in nodes]:
            del self.state[gone]
        return [n for n in nodes if self.due(f"node:{n}", now)]

    def keep_nodes(self, read: dict[str, Any], now: float, every: float) -> None:
        """Each node's answer, due again a minute on; nodes read for the first time together
        are spread over the minute after that, so later collects each read a few of them."""
        first = sorted(n for n in read if f"node:{n}" not in self.state)
        for node, value in read.items():
            spread = first.index(node) / len(first) if node in first else 0.0
            self.keep(f"node:{node}", value, now + every * (1 + spread))

    def nodes(self) -> dict[str, Any]:
        return {k[5:]: v["value"] for k, v in self.state.items() if k.startswith("node:")}
