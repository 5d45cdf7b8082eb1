"""Which plan goes first when kinds of move compete for the same slots and guests.

Evacuation (maintenance) > rule-violation fix > pressure relief > balancing >
consolidation (docs/design.md "Which plan goes first"): a node that must be emptied and a
guest where a rule forbids it are obligations; the rest are improvements. Consolidation is
the emptying of a node an admin powers down: placed as an evacuation, ranked last. A higher kind
may expire the pending moves of a lower one; a running migration is never cut short.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["evacuation", "failback", "rule-fix", "pressure", "balancing", "consolidation"]

KINDS: tuple[Kind, ...] = ("evacuation", "failback", "rule-fix", "pressure", "balancing", "consolidation")
# The way back after a maintenance is part of the maintenance: it ranks with the evacuation.
RANK: dict[str, int] = {
    "evacuation": 0,
    "failback": 0,
    "rule-fix": 1,
    "pressure": 2,
    "balancing": 3,
    "consolidation": 4,
}
# The kinds that empty a node in maintenance: its evacuation, or a power-down's consolidation
# (placed the same way, with Proxmox's placement; no guards).
EMPTYING: tuple[Kind, ...] = ("evacuation", "consolidation")
# Obligations, not improvements: priority 1, and margin, hold, threshold and load floor do not apply.
MANDATORY: frozenset[str] = frozenset({"evacuation", "failback", "rule-fix"})


def rank(kind: str) -> int:
    """0 goes first."""
    return RANK[kind]


def outranks(kind: str, other: str) -> bool:
    """Whether a plan of `kind` may expire the pending moves of a plan of `other`."""
    return rank(kind) < rank(other)
