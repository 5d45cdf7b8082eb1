"""A migration's states and the one way between them (DESIGN.md "Migration states"), on the
control loop's machine skeleton (crs.machine); dashboard/models/migration.py takes every change
through it as one conditional UPDATE."""

from __future__ import annotations

from .machine import Machine

MIGRATION = Machine(
    "migration",
    {
        "suggested": "suggested",
        "approved": "approved",
        "running": "running",
        "done": "done",
        "failed": "failed",
        "rejected": "rejected",
        "expired": "expired",
    },
    frozenset(
        {
            ("suggested", "approved"),
            ("suggested", "rejected"),
            ("suggested", "expired"),
            ("approved", "running"),
            ("approved", "expired"),
            ("running", "done"),
            ("running", "failed"),
            ("running", "approved"),  # Proxmox refused it for a lock: it waits (executor.locked_out)
        }
    ),
)
