"""The moves a cluster already has in hand: recommendations waiting for a decision, and
approved or running migrations (their claims), as a round receives them and changes them.

A round may expire some, create plans and approve steps; `Ledger` keeps the round's view of
every move's state while it decides, so each later decision sees the earlier ones (an
evacuation's plan outranks the balancing plan before that plan is judged).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from .decision import Move, Step
from .precedence import outranks

PENDING = "suggested"
OWED_STATES = ("suggested", "approved", "running")  # a move that still covers its guest


@dataclass(frozen=True, slots=True)
class PlannedMove:
    """One step of a stored plan. `id` None: a step this round creates."""

    id: int | None
    plan: int | None
    step: int
    after: int | None  # the step of its plan it was computed behind
    kind: str  # crs.precedence.KINDS
    state: str  # suggested, approved or running
    move: Move
    suggested_at: datetime | None = None
    automatic: bool = False  # approved by a round, not a person
    reason: str = ""  # an approved step held by the windows says what it waits for

    @property
    def name(self) -> str:
        """How the trail and the status words name it: "#12", or plan and step before it exists."""
        return f"#{self.id}" if self.id is not None else f"plan {self.plan} step {self.step}"


@dataclass(frozen=True, slots=True)
class Expiry:
    move: PlannedMove  # as it stood before it expired
    reason: str
    details: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Created:
    """A plan the round stores: its steps as recommendations, in plan order."""

    number: int
    kind: str
    steps: tuple[Step, ...]
    reasons: tuple[str, ...] = ()  # owed plans: why each step is owed
    margin: float = 0.0
    method: str = ""

    def moves(self) -> tuple[PlannedMove, ...]:
        return tuple(
            PlannedMove(None, self.number, i, s.after, self.kind, PENDING, s.move) for i, s in enumerate(self.steps)
        )


class Ledger:
    """The round's running account of moves: what expired, was created or approved, in order."""

    def __init__(self, moves: tuple[PlannedMove, ...], next_plan: int) -> None:
        self.moves = list(moves)
        self.next_plan = next_plan
        self.created: list[Created] = []  # plans to store, in order
        self.expired: list[Expiry] = []
        self.approved: list[PlannedMove] = []
        self.approve_details: dict[tuple[int | None, int | None, int], dict[str, object]] = {}

    def alive(
        self, states: tuple[str, ...] = OWED_STATES, kinds: tuple[str, ...] | frozenset[str] = ()
    ) -> list[PlannedMove]:
        """The moves in `states` (of `kinds`; all when empty), in plan and step order."""
        found = [m for m in self.moves if m.state in states and (not kinds or m.kind in kinds)]
        return sorted(found, key=lambda m: (m.plan or 0, m.step))

    def expire(self, moves: list[PlannedMove], reason: str, details: dict[str, object] | None = None) -> None:
        for m in moves:
            if m.state not in ("suggested", "approved"):
                continue  # a running migration is never cut short
            self._set(m, "expired")
            if any(_key(a) == _key(m) for a in self.approved):  # approved by this round: its row is still suggested
                self.approved = [a for a in self.approved if _key(a) != _key(m)]
                m = replace(m, state=PENDING)
            self.expired.append(Expiry(m, reason, details or {}))

    def create(self, kind: str, steps: tuple[Step, ...], **plan: object) -> Created:
        created = Created(self.next_plan, kind, steps, **plan)  # type: ignore[arg-type]
        self.next_plan += 1
        self.created.append(created)
        self.moves += created.moves()
        return created

    def approve(self, moves: list[PlannedMove], details: dict[str, object]) -> None:
        for m in moves:
            if m.state == PENDING:
                self._set(m, "approved")
                self.approved.append(m)
                self.approve_details[_key(m)] = details

    def outranked_by(self, kind: str) -> list[PlannedMove]:
        """Pending moves (suggested, or approved and not started) of kinds `kind` goes before."""
        return [m for m in self.alive(("suggested", "approved")) if outranks(kind, m.kind)]

    def _set(self, move: PlannedMove, state: str) -> None:
        self.moves = [replace(m, state=state) if _key(m) == _key(move) else m for m in self.moves]


def _key(m: PlannedMove) -> tuple[int | None, int | None, int]:
    return (m.id, m.plan, m.step)
