"""The next hour's forecast of a live round: each guest's stored peaks of past days, handed to
the engine (crs.forecast.next_hour decides; this module only reads and lays out the history).

`next_hour` reads, of each past day, only the hour after `now`; so one query fetches only
those hours of up to 28 days (filtered by time of day in SQL, not per guest), and the arrays
hold only them, day after day: a "day" of `SLOTS` 5-minute samples. A 5-minute row fills its
slot, a finer row raises its slot to its peak, an hourly row (older than a week) fills each
slot it covers with the hour's peak. The answer changes only when a 5-minute slot begins
(the rows it reads are at least 23 hours old), so each worker keeps it for the slot: the
round's cost then grows by the query once per 5 minutes, not every round.
"""

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
from django.db import connection

import crs.forecast
from crs.model import Forecast, Snapshot

from .timesql import FIVE_MINUTES, HOUR, epoch_sql

DAY_S = 86400
SLOTS = HOUR // FIVE_MINUTES  # samples of the hour ahead
DAYS = crs.forecast.DAYS_BACK

# cluster id → (the slot's start, epoch seconds; each guest's forecast, its peak's time from that start)
_cache: dict[int, tuple[int, dict[str, Forecast]]] = {}


def applied(cluster_id: int, snapshot: Snapshot, now: datetime) -> Snapshot:
    """`snapshot` with each guest's forecast when the cluster's setting is on; a guest with less
    than a day of stored history gets none (the round is reactive for it)."""
    if snapshot.settings.forecast != "on":
        return snapshot
    epoch = int(now.timestamp())
    slot = epoch - epoch % FIVE_MINUTES
    cached = _cache.get(cluster_id)
    if cached is None or cached[0] != slot:
        cached = _cache[cluster_id] = (slot, guest_forecasts(cluster_id, slot))
    found, elapsed = cached[1], epoch - slot
    return replace(
        snapshot,
        guests=tuple(
            replace(g, forecast=replace(f, at_s=max(0.0, f.at_s - elapsed)) if (f := found.get(g.sid)) else None)
            for g in snapshot.guests
        ),
    )


def guest_forecasts(cluster_id: int, slot: int) -> dict[str, Forecast]:
    """Per guest with a day of history, its peak over the hour after the 5-minute `slot` (epoch
    seconds), from its stored peaks of the same hour of up to 28 past days."""
    start = slot + FIVE_MINUTES  # the hour ahead starts with the next slot
    rows = _rows(cluster_id, start)
    if not rows:
        return {}
    sids = sorted({r[0] for r in rows})
    index = {sid: i for i, sid in enumerate(sids)}
    guest = np.fromiter((index[r[0]] for r in rows), int, len(rows))
    at = np.fromiter((r[1] - r[1] % FIVE_MINUTES for r in rows), np.int64, len(rows))
    length = np.fromiter((max(r[2], FIVE_MINUTES) for r in rows), np.int64, len(rows))
    cpu_peak = np.fromiter((r[3] for r in rows), float, len(rows))
    mem_peak = np.fromiter((r[4] for r in rows), float, len(rows))
    day = (start - at + HOUR - 1) // DAY_S  # the past day whose hour the row falls in (1 = yesterday)
    offset = at - (start - day * DAY_S)  # seconds from that hour's start, -1 h < offset < 1 h
    width = SLOTS * DAYS + 1  # day d's hour in columns SLOTS·(DAYS − d) + 1 …, `now` the last column
    cpu, memory = np.zeros((len(sids), width)), np.zeros((len(sids), width))
    filled = np.zeros((len(sids), width), bool)
    for k in range(SLOTS):
        covers = (offset <= k * FIVE_MINUTES) & (k * FIVE_MINUTES < offset + length) & (day >= 1) & (day <= DAYS)
        g, column = guest[covers], SLOTS * (DAYS - day[covers]) + k + 1
        np.maximum.at(cpu, (g, column), cpu_peak[covers])
        np.maximum.at(memory, (g, column), mem_peak[covers])
        filled[g, column] = True
    # A guest's days: back to the oldest past day whose hour it was there from the start of.
    starts = filled[:, SLOTS * (DAYS - np.arange(1, DAYS + 1)) + 1]  # (guests, day 1 … DAYS)
    days = np.where(starts.any(axis=1), DAYS - np.argmax(starts[:, ::-1], axis=1), 0)
    out: dict[str, Forecast] = {}
    for d in set(days.tolist()) - {0}:
        group = np.flatnonzero(days == d)
        columns = slice(SLOTS * (DAYS - d), width)  # its d days, as if its history began there
        found = crs.forecast.next_hour(cpu[group, columns], memory[group, columns], SLOTS * d, SLOTS, FIVE_MINUTES)
        out |= {sids[i]: f for i, f in zip(group, found, strict=True) if f is not None}
    return out


def _rows(cluster_id: int, start: int) -> list[tuple[str, int, int, float, float]]:
    """(guest, epoch seconds, span, cpu peak, memory peak) of the rows that may cover the hour
    from `start` on one of the past days: an hourly row may begin up to an hour before it."""
    vendor = connection.vendor
    epoch = epoch_sql("at", vendor)
    sql = (
        f"SELECT guest, {epoch}, span, cpu_peak, mem_peak_bytes FROM dashboard_guestsample"
        f" WHERE cluster_id = %s AND at >= %s AND at < %s AND ({epoch} - %s) %% {DAY_S} < %s"
    )
    since, until = (
        connection.ops.adapt_datetimefield_value(datetime.fromtimestamp(t, tz=UTC))  # as stored (history.fold)
        for t in (start - DAYS * DAY_S - HOUR, start + HOUR - DAY_S)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [cluster_id, since, until, start - HOUR - DAYS * DAY_S, 2 * HOUR])
        return cursor.fetchall()
