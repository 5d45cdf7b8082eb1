"""Which audit events a round's outcome writes (dashboard/rounds.py loads the previous state and writes them).

Why a new plan waits for a person, and what blocked a new plan: a kept plan once, with its
figures on fresh data; anything else once per change rather than every round, so the trail
says each thing when it happens, not every round it stays true.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .round import Outcome


@dataclass(frozen=True, slots=True)
class Previous:
    """What the trail already says: the last recorded round's waiting words, and whether the
    kept plan's "waiting" event is written already."""

    waiting: str = ""
    kept_logged: bool = False


def reads(outcome: Outcome) -> Literal["kept", "waiting", ""]:
    """Which previous state `events` needs for this outcome, so the caller loads only that:
    whether the kept plan is logged, the last waiting words, or nothing."""
    if outcome.result.decision != "migrate" or not outcome.waiting:
        return ""
    return "kept" if outcome.verdict.kept else "waiting"


def events(outcome: Outcome, previous: Previous) -> tuple[tuple[str, dict[str, object]], ...]:
    """The (action, details) the round writes, in order."""
    out: list[tuple[str, dict[str, object]]] = []
    if outcome.held:
        plan = outcome.new_plan.number if outcome.new_plan else None
        out.append(("automation-held", {"plan": plan, "reason": outcome.held}))
    needed = reads(outcome)
    if needed == "kept":
        if not previous.kept_logged:
            out.append(("waiting", {"reason": outcome.verdict.kept, "kept_plan": outcome.kept_plan}))
    elif needed == "waiting" and outcome.waiting != previous.waiting:
        out.append(("waiting", {"reason": outcome.waiting}))
    return tuple(out)
