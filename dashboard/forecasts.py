"""The next hour's forecast of a live round: each guest's stored peaks of past days, handed to
the engine (crs.forecast.next_hour decides; this module only reads and lays out the history).

`next_hour` reads, of each past day, only the hour after `now` and, for its trial against the
naive forecast, the hour before; so one query an hour fetches only the hour before this one,
this hour and the next of up to 28 past days (filtered by time of day in SQL, for all guests
at once; the rows are at least 22 hours old, so nothing newer changes them), and the arrays
handed to it hold only those two hours of each day, day after day: a "day" of `BLOCK`
5-minute samples. Each worker keeps the loaded hours per cluster, and the forecasts per
5-minute slot: a round pays the query once an hour and `next_hour` once per 5 minutes.
"""

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np
from django.db import connection

import crs.forecast
from crs.model import Forecast, Snapshot

from .timesql import FIVE_MINUTES, HOUR, epoch_sql

DAY_S = 86400
SLOTS = HOUR // FIVE_MINUTES  # samples of the hour ahead
DAYS = crs.forecast.DAYS_BACK

WINDOW = 3 * SLOTS  # slots of each past day loaded at once: the hour before this one, this hour and the next
BLOCK = 2 * SLOTS  # slots handed to `next_hour` per past day: the hour up to the slot and the hour after it


@dataclass
class Loaded:
    """One cluster's stored peaks of the hour before this one, this hour and the next on each past
    day (loaded once an hour), and the forecasts of the current 5-minute slot made from them."""

    hour: int  # epoch seconds
    sids: list[str]
    cpu: np.ndarray  # (guests, DAYS, WINDOW): day d at [d - 1], slot k at `hour` − 1 h + 5 min · k, d days back
    memory: np.ndarray
    filled: np.ndarray
    slot: int = -1
    found: dict[str, Forecast] = field(default_factory=dict)  # at `slot`: each peak's time from the slot


_cache: dict[int, Loaded] = {}


def applied(cluster_id: int, snapshot: Snapshot, now: datetime) -> Snapshot:
    """`snapshot` with each guest's forecast when the cluster's setting is on; a guest with less
    than a day of stored history gets none (the round is reactive for it)."""
    if snapshot.settings.forecast != "on":
        return snapshot
    epoch = int(now.timestamp())
    slot, hour = epoch - epoch % FIVE_MINUTES, epoch - epoch % HOUR
    loaded = _cache.get(cluster_id)
    if loaded is None or loaded.hour != hour:
        loaded = _cache[cluster_id] = load(cluster_id, hour)
    if loaded.slot != slot:
        loaded.slot, loaded.found = slot, guest_forecasts(loaded, (slot - hour) // FIVE_MINUTES)
    elapsed = epoch - slot
    return replace(
        snapshot,
        guests=tuple(
            replace(g, forecast=replace(f, at_s=max(0.0, f.at_s - elapsed)) if (f := loaded.found.get(g.sid)) else None)
            for g in snapshot.guests
        ),
    )


def guest_forecasts(loaded: Loaded, j: int) -> dict[str, Forecast]:
    """Per guest whose forecast earned its place, its peak over the hour after the `j`-th 5-minute
    slot of the loaded hour, from its stored peaks of the same hour of up to 28 past days."""
    block = slice(j + 1, j + 1 + BLOCK)  # the hour up to slot j (window slot SLOTS + j) and the hour after
    guests = len(loaded.sids)
    if not guests:
        return {}
    width = BLOCK * DAYS + SLOTS  # day d in columns BLOCK·(DAYS − d) …, today's last hour (unread) at the end
    cpu, memory = np.zeros((guests, width)), np.zeros((guests, width))
    cpu[:, : BLOCK * DAYS] = loaded.cpu[:, ::-1, block].reshape(guests, -1)
    memory[:, : BLOCK * DAYS] = loaded.memory[:, ::-1, block].reshape(guests, -1)
    # A guest's days: back to the oldest past day whose hour it was there from the start of.
    starts = loaded.filled[:, :, j + 1]  # (guests, day 1 … DAYS)
    days = np.where(starts.any(axis=1), DAYS - np.argmax(starts[:, ::-1], axis=1), 0)
    out: dict[str, Forecast] = {}
    for d in set(days.tolist()) - {0}:
        group = np.flatnonzero(days == d)
        columns = slice(BLOCK * (DAYS - d), width)  # its d days, as if its history began there
        now = BLOCK * d + SLOTS - 1
        found = crs.forecast.next_hour(cpu[group, columns], memory[group, columns], now, BLOCK, FIVE_MINUTES)
        out |= {loaded.sids[i]: f for i, f in zip(group, found, strict=True) if f is not None}
    return out


def load(cluster_id: int, hour: int) -> Loaded:
    """The stored peaks of the three hours from an hour before `hour` on each past day, one slot
    per 5 minutes: a 5-minute row fills its slot, a finer row raises its slot to its peak, an
    hourly row fills the slots it covers with the hour's peak."""
    rows = _rows(cluster_id, hour)
    sids = sorted({r[0] for r in rows})
    index = {sid: i for i, sid in enumerate(sids)}
    shape = (len(sids), DAYS, WINDOW)
    cpu, memory, filled = np.zeros(shape), np.zeros(shape), np.zeros(shape, bool)
    if rows:
        guest = np.fromiter((index[r[0]] for r in rows), int, len(rows))
        at = np.fromiter((r[1] - r[1] % FIVE_MINUTES for r in rows), np.int64, len(rows))
        length = np.fromiter((max(r[2], FIVE_MINUTES) for r in rows), np.int64, len(rows))
        cpu_peak = np.fromiter((r[3] for r in rows), float, len(rows))
        mem_peak = np.fromiter((r[4] for r in rows), float, len(rows))
        start = hour - HOUR
        day = (start - at - 1) // DAY_S + 1  # the past day whose three hours the row falls in (1 = yesterday)
        offset = at - (start - day * DAY_S)  # seconds from those hours' start: 0 ≤ offset < 3 h
        for k in range(WINDOW):
            covers = (offset <= k * FIVE_MINUTES) & (k * FIVE_MINUTES < offset + length) & (day >= 1) & (day <= DAYS)
            at_k = (guest[covers] * DAYS + day[covers] - 1) * WINDOW + k  # into the flat (contiguous) arrays
            np.maximum.at(cpu.reshape(-1), at_k, cpu_peak[covers])
            np.maximum.at(memory.reshape(-1), at_k, mem_peak[covers])
            filled.reshape(-1)[at_k] = True
    return Loaded(hour, sids, cpu, memory, filled)


def _rows(cluster_id: int, hour: int) -> list[tuple[str, int, int, float, float]]:
    """(guest, epoch seconds, span_s, cpu peak, memory peak) of the rows in the three hours from an
    hour before `hour` (a whole hour: an hourly row starts at one) on each of the past days: one
    range of the (cluster, at) index a day, so the query reads an eighth of the 28 days' rows."""
    epoch = epoch_sql("at", connection.vendor)
    ranges = " OR ".join(["(at >= %s AND at < %s)"] * DAYS)
    sql = (
        f"SELECT guest, {epoch}, span_s, cpu_peak, mem_peak_bytes FROM dashboard_guestsample"
        f" WHERE cluster_id = %s AND ({ranges})"
    )
    bounds = [
        connection.ops.adapt_datetimefield_value(datetime.fromtimestamp(t, tz=UTC))  # as stored (history.fold)
        for day in range(1, DAYS + 1)
        for t in (hour - day * DAY_S - HOUR, hour - day * DAY_S + 2 * HOUR)
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, [cluster_id, *bounds])
        return cursor.fetchall()
