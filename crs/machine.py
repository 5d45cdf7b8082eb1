"""The skeleton every state machine of the control loop shares (Proxmox's HA manager: one
next-state function per machine, every change checked against the valid transitions).

A machine is a table: its states with the words the admin reads, and the transitions it
allows. Its next-state function (crs.rolling.next_steps, crs.power.next_steps) is pure and
returns Changes made only through `Machine.change`, which refuses a transition the table does
not hold, so a wrong step fails in a fixture instead of reaching the database. The web side
applies each Change as a conditional UPDATE (the row still in `before`), in one transaction,
and writes the audit event the Change names: a third machine (a drain for an upgrade) is a
table and a next-state function, not a third copy of that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import CrsError


class InvalidTransition(CrsError):
    """Raised when a next-state function asks for a change its machine does not allow."""


@dataclass(frozen=True, slots=True)
class Change:
    """One step of one subject (a node of a rolling maintenance, a power-down): `before` → `after`,
    the audit event it writes with its details, and the other columns the step sets."""

    subject: str
    before: str
    after: str
    action: str
    details: Mapping[str, object] = field(default_factory=dict)
    fields: Mapping[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "subject": self.subject,
            "before": self.before,
            "after": self.after,
            "action": self.action,
        }
        return (
            out
            | ({"details": dict(self.details)} if self.details else {})
            | ({"fields": dict(self.fields)} if self.fields else {})
        )


@dataclass(frozen=True, slots=True)
class Machine:
    """A state machine: its states in the admin's words and the transitions it allows."""

    name: str
    labels: Mapping[str, str]
    transitions: frozenset[tuple[str, str]]

    def __post_init__(self) -> None:
        unknown = {s for pair in self.transitions for s in pair} - set(self.labels)
        if unknown:
            raise ValueError(f"{self.name}: transitions name states without a label: {sorted(unknown)}")

    def allows(self, before: str, after: str) -> bool:
        return (before, after) in self.transitions

    def sources(self, after: str) -> tuple[str, ...]:
        """The states `after` may be reached from, in the table's order (a conditional UPDATE's filter)."""
        return tuple(s for s in self.labels if (s, after) in self.transitions)

    def change(
        self,
        subject: str,
        before: str,
        after: str,
        action: str,
        details: Mapping[str, object] | None = None,
        fields: Mapping[str, object] | None = None,
    ) -> Change:
        """The Change `before` → `after`; InvalidTransition when the machine does not allow it."""
        if not self.allows(before, after):
            allowed = ", ".join(sorted(a for b, a in self.transitions if b == before)) or "none"
            raise InvalidTransition(
                f"{self.name} {subject}: {before} → {after} is not a valid transition (from {before}: {allowed})"
            )
        return Change(subject, before, after, action, dict(details or {}), dict(fields or {}))
