"""Source adapters: how a cluster becomes a `Snapshot` and how a migration is carried out.

Every adapter has the same small interface (`base.Source`), so the dashboard treats a
simulated cluster, a Proxmox VE cluster and a read-only snapshot file alike.
"""

from __future__ import annotations

from typing import Any

from .base import Source, SourceError, TaskStatus
from .config import ConfigError

__all__ = ["KINDS", "ConfigError", "Source", "SourceError", "TaskStatus", "open_source"]

KINDS = ("simulator", "proxmox", "snapshot")


def open_source(kind: str, config: dict[str, Any], state: dict[str, Any] | None = None) -> Source:
    """The adapter of one cluster, resumed from its persisted `state()` when given.

    Adapters are imported here, on use, so that the command line does not load an
    HTTP client to replay a trace.
    """
    if kind == "simulator":
        from .simulator import Simulator, parse_config

        return Simulator(parse_config(config), state)
    if kind == "proxmox":
        from .proxmox import Proxmox
        from .proxmox import parse_config as parse_proxmox

        return Proxmox(parse_proxmox(config), state)
    if kind == "snapshot":
        from .snapshot import open_snapshot

        return open_snapshot(config)
    raise ConfigError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
