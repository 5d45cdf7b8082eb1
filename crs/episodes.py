"""The "imbalance above the threshold" episode and who is told of it (dashboard/notify.py applies it).

An episode is the run of rounds above the threshold: it begins at the first such round and ends
at a round at or below it, so the next rise is a new one. Each destination that chose
"imbalance-above" is told once per episode, when it has lasted that destination's wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True)
class Destination:
    """A notification destination as the episode reads it."""

    pk: int
    wants: bool  # it chose "imbalance-above"
    after: timedelta  # how long an episode lasts before it is told (imbalance_for)
    told_for: datetime | None = None  # the episode it was last told of (its start)


@dataclass(frozen=True, slots=True)
class Notice:
    """Whom to tell of the episode that began at `since`, and what."""

    due: tuple[int, ...]
    title: str
    body: str


def above(imbalance: float, threshold: float) -> bool:
    """Whether a round is part of an episode: at the threshold is not above it."""
    return imbalance > threshold


def notice(
    cluster: str,
    imbalance: float,
    threshold: float,
    since: datetime,
    at: datetime,
    destinations: tuple[Destination, ...],
) -> Notice:
    """Who is told now of the episode that began at `since` (a round at `at` above the
    threshold): each destination that wants it, not told of this episode yet, whose wait it has lasted."""
    lasted = at - since
    due = tuple(d.pk for d in destinations if d.wants and d.after <= lasted and d.told_for != since)
    title = f"{cluster}: imbalance above the threshold for {lasted_words(lasted)}"
    body = (
        f"Imbalance {imbalance:.1%}, threshold {threshold:.1%}; above it since "
        f"{since:%Y-%m-%d %H:%M} UTC, in every round since."
    )
    return Notice(due, title, body)


def lasted_words(duration: timedelta) -> str:
    minutes = round(duration.total_seconds() / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}" if minutes < 120 else f"{minutes / 60:.1f} hours"
