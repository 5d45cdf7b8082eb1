"""The one interface every source adapter implements.

Time is passed in (`now`, Unix seconds) rather than read from the clock, so that the
simulator is deterministic under test and a worker in another process can resume it
from its persisted `state()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..errors import SourceError
from ..model import Snapshot

__all__ = ["Source", "SourceError", "TaskState", "TaskStatus"]

TaskState = Literal["running", "done", "failed"]


@dataclass(frozen=True, slots=True)
class TaskStatus:
    state: TaskState
    progress: float = 0.0  # 0..1
    reason: str = ""  # why it failed (the task's exit status), empty otherwise


class Source(Protocol):
    def collect(self, now: float) -> Snapshot:
        """The cluster as it is at `now`; raises SourceError when it cannot tell."""

    def migrate(self, sid: str, target: str, now: float) -> str:
        """Start moving `sid` to `target`; returns a task id to follow."""

    def task_status(self, task_id: str, now: float) -> TaskStatus:
        """Where a migration started by `migrate` stands at `now`."""

    def abort(self, task_id: str, now: float) -> None:
        """Ask a running migration to stop (emergency stop); the guest stays where it was."""

    def maintenance(self, node: str, on: bool, now: float) -> None:
        """Put `node` into maintenance (no guest may come) or take it out; SourceError where
        the cluster does not take it from us (Proxmox: only its command line does)."""

    def shutdown(self, node: str, now: float) -> None:
        """Power `node` off (an emptied node going to standby); SourceError where the source has
        no power to switch (the simulator, a snapshot file: the admin powers it off by hand).
        Powering on is never the source's: wake-on-LAN is out of scope."""

    def state(self) -> dict[str, Any]:
        """JSON-able state to persist between calls (empty for stateless adapters)."""
