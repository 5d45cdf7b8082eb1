"""Anti-thrashing guards from migration history: who is in cooldown, and which moves stay barred.

One derivation for the dashboard (from its Migration rows) and for `crs replay` (from
the replay's own moves), so that a replay predicts what the product will suggest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import Guards


@dataclass(frozen=True, slots=True)
class PastMove:
    guests: tuple[str, ...]
    source: str
    target: str
    outcome: str  # "done", "failed" (it ran) or "rejected" (a person said no)
    at: float  # seconds: when it finished or was rejected


def guards_from(history: Iterable[PastMove], now: float, cooldown_s: float, rejection_memory_s: float) -> Guards:
    """Guests of moves that ended within the cooldown are in cooldown and are not sent back where they
    came from (the ping-pong guard); a rejected guest → node move stays barred for the
    rejection memory."""
    in_cooldown: set[str] = set()
    barred: set[tuple[str, str]] = set()
    for move in history:
        age = now - move.at
        if move.outcome in ("done", "failed") and age <= cooldown_s:
            in_cooldown.update(move.guests)
            barred.update((sid, move.source) for sid in move.guests)
        elif move.outcome == "rejected" and age <= rejection_memory_s:
            barred.update((sid, move.target) for sid in move.guests)
    return Guards(frozenset(in_cooldown), frozenset(barred))
