"""A read-only "what-if" cluster: a crs-snapshot/1 file (or upload) answered as it is.

Admins import a snapshot exported from a live cluster to try settings on it without
touching the cluster. It never changes, and it refuses migrations rather than
pretending to carry them out.
"""

from __future__ import annotations

from typing import Any

from .. import snapshot as contract
from ..errors import CrsError
from ..model import Snapshot
from . import config as cfg
from .base import SourceError, TaskStatus

WHERE = "snapshot"
READ_ONLY = "read-only what-if cluster: import the snapshot into a live cluster's settings to act on it"


class SnapshotFile:
    """The `Source` for a stored snapshot; stateless."""

    def __init__(self, snapshot: Snapshot):
        self.snapshot = snapshot

    def collect(self, now: float) -> Snapshot:
        return self.snapshot

    def migrate(self, sid: str, target: str, now: float) -> str:
        raise SourceError(f"migrate {sid} to {target}: {READ_ONLY}")

    def task_status(self, task_id: str, now: float) -> TaskStatus:
        raise SourceError(f"task {task_id!r}: {READ_ONLY}, it runs no tasks")

    def abort(self, task_id: str, now: float) -> None:
        raise SourceError(f"task {task_id!r}: {READ_ONLY}, it runs no tasks")

    def maintenance(self, node: str, on: bool, now: float) -> None:
        raise SourceError(f"maintenance of {node}: {READ_ONLY}")

    def shutdown(self, node: str, now: float) -> None:
        raise SourceError(f"shutdown of {node}: {READ_ONLY}")

    def state(self) -> dict[str, Any]:
        return {}


def open_snapshot(config: dict[str, Any]) -> SnapshotFile:
    """From `path` (a file on the server) or `snapshot` (the decoded JSON, e.g. an upload)."""
    config = cfg.refuse_unknown(config, {"path", "snapshot"}, WHERE)
    if ("path" in config) == ("snapshot" in config):
        raise cfg.ConfigError(f"{WHERE}: give exactly one of path (a file) or snapshot (its JSON content)")
    try:
        if "path" in config:
            return SnapshotFile(contract.load_file(cfg.text(config, "path", WHERE)))
        return SnapshotFile(contract.parse(config["snapshot"]))
    except CrsError as exc:
        raise cfg.ConfigError(f"{WHERE}: refused: {exc}") from exc
