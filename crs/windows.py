"""Change windows and blackouts: when automation may start balancing migrations on its own.

Admins allow automatic balancing only at quiet times ("weekdays 22:00–06:00") and forbid it
around known events ("backups Sunday 01:00–04:00"). Weekly windows are wall-clock times in
the cluster's time zone, because that is how the people and the backups keep time: a window
22:00–06:00 stays 22:00–06:00 local across a DST change (it lasts 7 or 9 real hours that
night). Blackouts are one-off absolute intervals. Evacuations and rule fixes are never
held; callers only ask here for balancing, pressure and consolidation moves.

Without any window, automation may run at any time except during a blackout.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

LOOKAHEAD_DAYS = 8  # a weekly schedule repeats within a week; one day more for windows past midnight


@dataclass(frozen=True, slots=True)
class Window:
    """Every listed weekday from `start` to `end` (wall clock). `end` <= `start` runs past
    midnight into the next day: Fri 22:00–06:00 ends Saturday 06:00."""

    days: frozenset[int]  # 0 = Monday … 6 = Sunday: the days it starts on
    start: time
    end: time

    def contains(self, local: datetime) -> bool:
        """Whether the wall-clock moment `local` (in the cluster's zone) is inside the window."""
        day, clock = local.weekday(), local.time().replace(tzinfo=None)
        if self.start < self.end:
            return day in self.days and self.start <= clock < self.end
        yesterday = (day - 1) % 7
        return (day in self.days and clock >= self.start) or (yesterday in self.days and clock < self.end)


@dataclass(frozen=True, slots=True)
class Blackout:
    """No automatic moves from `start` to `end` (aware datetimes), whatever the windows say."""

    start: datetime
    end: datetime
    label: str = ""

    def contains(self, moment: datetime) -> bool:
        return self.start.astimezone(UTC) <= moment.astimezone(UTC) < self.end.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether automatic moves may start at a moment, until when, and why not."""

    open: bool
    until: datetime | None  # the next change (opens or closes); None: never within a week
    reason: str  # "" when open; "window" outside every window; "blackout" during one
    label: str = ""  # the blackout's label

    def to_dict(self) -> dict[str, object]:
        return {
            "open": self.open,
            "until": self.until.isoformat() if self.until else None,
            "reason": self.reason,
            "label": self.label,
        }


def _state(moment: datetime, zone: ZoneInfo, windows: tuple[Window, ...], blackouts: tuple[Blackout, ...]) -> Gate:
    """The gate at `moment` without its `until`."""
    for blackout in blackouts:
        if blackout.contains(moment):
            return Gate(False, None, "blackout", blackout.label)
    local = moment.astimezone(zone)
    if windows and not any(w.contains(local) for w in windows):
        return Gate(False, None, "window")
    return Gate(True, None, "")


def _runs(window: Window, now: datetime, zone: ZoneInfo, days: int) -> list[tuple[datetime, datetime]]:
    """The window's runs (start, end) starting from yesterday to `days` ahead of `now`, in UTC.

    A wall time is turned into a moment on its own date in the zone, so DST is the zone's
    business; a wall time the spring change skips maps to the moment after the gap (fold 0).
    Moments are in UTC: Python compares and subtracts two datetimes of one zone by their wall
    clocks, which is wrong in the hour the autumn change repeats."""
    today: date = now.astimezone(zone).date()
    runs = []
    for offset in range(-1, days + 1):
        day = today + timedelta(days=offset)
        if day.weekday() in window.days:
            end_day = day if window.start < window.end else day + timedelta(days=1)
            start = datetime.combine(day, window.start, tzinfo=zone).astimezone(UTC)
            runs.append((start, datetime.combine(end_day, window.end, tzinfo=zone).astimezone(UTC)))
    return runs


def _boundaries(
    now: datetime, zone: ZoneInfo, windows: tuple[Window, ...], blackouts: tuple[Blackout, ...]
) -> list[datetime]:
    """Every moment in the next LOOKAHEAD_DAYS at which the gate may change, in order."""
    moments = [b.astimezone(UTC) for blackout in blackouts for b in (blackout.start, blackout.end)]
    moments += [m for window in windows for run in _runs(window, now, zone, LOOKAHEAD_DAYS) for m in run]
    horizon = now + timedelta(days=LOOKAHEAD_DAYS)
    return sorted(m for m in moments if now < m <= horizon)


def gate(now: datetime, zone: ZoneInfo, windows: tuple[Window, ...], blackouts: tuple[Blackout, ...] = ()) -> Gate:
    """May automation start balancing moves at `now` (aware), and until when does that hold?

    `until` is the first boundary at which the answer changes: the page's "paused until
    22:00 (window)" or "allowed until 06:00" (in UTC)."""
    now = now.astimezone(UTC)
    current = _state(now, zone, windows, blackouts)
    for moment in _boundaries(now, zone, windows, blackouts):
        if _state(moment, zone, windows, blackouts).open != current.open:
            return Gate(current.open, moment, current.reason, current.label)
    return current


def next_occurrence(window: Window, now: datetime, zone: ZoneInfo) -> tuple[datetime, datetime] | None:
    """The window's current or next run as two moments (start, end), for showing it in another
    zone: a weekly wall-clock window maps to different browser times across a DST change, so
    the page converts one real occurrence rather than the bare wall times."""
    return next(((start, end) for start, end in _runs(window, now, zone, LOOKAHEAD_DAYS) if end > now), None)
