"""How well each guest's own history foretells its next hour: the seasonal baseline.

Workloads repeat by the day (backups, batch jobs, office hours), so a guest's peak in
the coming hour is forecast from its peaks in the same hour of the past days, at a high
percentile rather than the mean: a forecast that misses the peak misses the stall. The
measure is the mean absolute error of each guest's next-hour peak, beside the naive
forecast "the next hour peaks as the last one did". A guest with less history than one
day (one season) is not forecast.

A guest's forecast reaches a plan only where it has earned its place (`next_hour`'s trial):
on the guest's own last days, at the hours where it would have acted (a rise the naive
forecast did not foresee), it came within 10 % of the peak on most of them and closer in sum
than the naive forecast. Over all hours the naive forecast wins every month, so scoring all
hours would never let it act.

Plans use it with `settings.forecast` on (`stalls`, `barred`, `foreseen`): a node whose
guests are predicted to stall it within the hour takes no guest, and a stall due before a
move could finish is relieved ahead of it. Only a peak that came back on most past days is
trusted for that: the seasonal peak overshoots flat hours, a repeated rise is what it foretells.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from . import pressure
from .model import Forecast, Guest, Pressure, Snapshot

PERCENTILE = 90.0  # of the same hour's peaks over the past days
DAYS_BACK = 28  # four weeks of history at most


@dataclass(frozen=True, slots=True)
class Accuracy:
    """Mean absolute error of the next-hour peak per guest and hour, seasonal and naive."""

    seasonal: float
    naive: float
    forecasts: int  # guest-hours forecast (from day 2 on)


def hourly_peaks(usage: np.ndarray, samples_per_hour: int) -> np.ndarray:
    """(guests, whole hours): each guest's highest sample in each hour of the trace."""
    hours = usage.shape[1] // samples_per_hour
    return usage[:, : hours * samples_per_hour].reshape(usage.shape[0], hours, samples_per_hour).max(axis=2)


def seasonal(peaks: np.ndarray, hour: int, hours_per_day: int = 24) -> np.ndarray:
    """Each guest's forecast peak for `hour` (at least a day into `peaks`) from the same hour
    of up to `DAYS_BACK` past days."""
    days = np.arange(1, min(DAYS_BACK, hour // hours_per_day) + 1)
    forecast: np.ndarray = np.percentile(peaks[:, hour - hours_per_day * days], PERCENTILE, axis=1)
    return forecast


def accuracy(usage: np.ndarray, samples_per_hour: int, hours_per_day: int = 24) -> Accuracy | None:
    """The seasonal baseline against the naive forecast over every hour from day 2 on; None
    when the series is not longer than a day (no guest has a season of history)."""
    peaks = hourly_peaks(usage, samples_per_hour)
    seasonal_errors, naive_errors = [], []
    for hour in range(hours_per_day, peaks.shape[1]):
        seasonal_errors.append(np.abs(seasonal(peaks, hour, hours_per_day) - peaks[:, hour]))
        naive_errors.append(np.abs(peaks[:, hour - 1] - peaks[:, hour]))
    if not seasonal_errors:
        return None
    return Accuracy(float(np.mean(seasonal_errors)), float(np.mean(naive_errors)), int(np.size(seasonal_errors)))


# -- the forecast a plan uses ---------------------------------------------------------

SEEN_SHARE = 0.9  # a past day "saw" the peak when that hour reached this share of it
# A stall is predicted only from a peak seen on at least two days and on most of the days looked
# at: on the July week a spike of day 1 (10:35) that day 2 did not repeat drew 22 moves ahead of
# nothing when one day's peak was trusted (bench/README.md).
MIN_SEEN = 2
HOUR_S = 3600.0
TRIAL_DAYS = 7  # a guest's forecast is judged on its last week of days
MIN_HISTORY_DAYS = 3  # and only with at least this much history: before that, the round is reactive
WITHIN = 0.10  # "predicted within 10 %": a trial day whose peak came this close


def _peaks(
    cpu: np.ndarray, memory: np.ndarray, now: int, days: int, per_day: int, horizon: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per guest, the forecast peak over the `horizon` samples after `now` from the same samples of
    the `days` days before: (cpu, memory, sample of the peak, days that saw it)."""
    index = now + np.arange(1, horizon + 1)[None, :] - per_day * np.arange(1, days + 1)[:, None]  # (days, horizon)
    past_cpu = cpu[:, index]  # (guests, days, horizon)
    by_sample = np.percentile(past_cpu, PERCENTILE, axis=1)
    at = by_sample.argmax(axis=1)
    peak = by_sample[np.arange(len(at)), at]
    mem = np.percentile(memory[:, index], PERCENTILE, axis=1)[np.arange(len(at)), at]
    seen = (past_cpu.max(axis=2) >= SEEN_SHARE * peak[:, None]).sum(axis=1)
    return peak, mem, at, seen


@dataclass(frozen=True, slots=True)
class Trial:
    """How each guest's forecast did on its last days at this time of day, where it would have
    acted: on `acted` days it foretold a repeated peak above the last hour's (the naive
    forecast's), `within` of them within `WITHIN` of the peak that came; `error` and `naive`
    are the two forecasts' absolute errors summed over those days, in cores."""

    acted: np.ndarray
    within: np.ndarray
    error: np.ndarray
    naive: np.ndarray

    @property
    def earned(self) -> np.ndarray:
        """It acted, came within `WITHIN` on most of the days it did, and erred less than the
        naive forecast in sum. Without the majority, on the July week, the forecast made 0.3
        more migrations a day than without it; with it, as many, and 9 % fewer guest-minutes
        under pressure (bench/README.md)."""
        return (self.acted > 0) & (2 * self.within > self.acted) & (self.error < self.naive)


def trial(cpu: np.ndarray, memory: np.ndarray, now: int, per_day: int, horizon: int) -> Trial:
    """The forecast of the hour after `now` made on each of the last `TRIAL_DAYS` days (from the
    days before it), against the hour that came and the naive forecast (that day's last hour's
    peak), scored only on the days it would have acted."""
    guests = cpu.shape[0]
    acted, within = np.zeros(guests, int), np.zeros(guests, int)
    error, naive = np.zeros(guests), np.zeros(guests)
    for back in range(1, TRIAL_DAYS + 1):
        then = now - back * per_day
        days = min(DAYS_BACK, (then + 1) // per_day)
        if days < 1 or then < horizon - 1:
            break
        peak, _, _, seen = _peaks(cpu, memory, then, days, per_day, horizon)
        came = cpu[:, then + 1 : then + horizon + 1].max(axis=1)
        last_hour = cpu[:, then - horizon + 1 : then + 1].max(axis=1)
        acts = (seen >= MIN_SEEN) & (2 * seen > days) & (peak > last_hour)
        acted += acts
        within += acts & (np.abs(peak - came) <= WITHIN * came)
        error += np.where(acts, np.abs(peak - came), 0.0)
        naive += np.where(acts, np.abs(last_hour - came), 0.0)
    return Trial(acted, within, error, naive)


def next_hour(cpu: np.ndarray, memory: np.ndarray, now: int, per_day: int, step_s: float) -> list[Forecast | None]:
    """Each guest's peak over the samples after `now` (an hour of them), from the same samples
    of up to `DAYS_BACK` past days: per sample the `PERCENTILE` of the past days' values, the
    peak the highest of those. None for a guest whose forecast has not earned its place
    (`trial`), and for every guest while there are fewer than `MIN_HISTORY_DAYS` days of
    history before the hour: the round is then reactive for them. `cpu` and `memory` hold,
    for each past day, the hour before `now` and the hour after it at least."""
    horizon = round(HOUR_S / step_s)
    days = min(DAYS_BACK, (now + 1) // per_day)
    if days < MIN_HISTORY_DAYS or now >= cpu.shape[1]:
        return [None] * cpu.shape[0]
    peak, mem, at, seen = _peaks(cpu, memory, now, days, per_day, horizon)
    tried = trial(cpu, memory, now, per_day, horizon)
    return [
        Forecast(float(c), float(m), float((k + 1) * step_s), int(s), days, int(a), int(w)) if ok else None
        for c, m, k, s, a, w, ok in zip(peak, mem, at, seen, tried.acted, tried.within, tried.earned)
    ]


@dataclass(frozen=True, slots=True)
class Stall:
    """A node predicted to stall within the hour: its guests' demand at the time most of them
    peak, against its threads (CPU) or its memory limit, and how often that hour saw it."""

    node: str
    resource: str  # "cpu" or "memory"
    at_s: float  # seconds from the snapshot
    load: float  # predicted demand / threads (CPU), or memory use / RAM
    seen: int
    days: int
    peaking: tuple[str, ...]  # the guests predicted to peak then
    lead_s: float  # how far ahead a move off it must start: a round plus the migration's expected time
    guest: str = ""  # the guest whose rise is the largest, whose forecast's trial is told
    acted: int = 0  # its trial: last days its forecast foresaw a rise at this time (0: not tried)
    within: int = 0  # of those, the days it came within `WITHIN` of the peak

    def text(self, taken_at: str | None) -> str:
        """ "predicted: node03 at 118 % CPU at 13:25 (seen on 5 of the last 5 days; vm:30's forecast
        came within 10 % on 4 of the last 5 days it foresaw a rise)"."""
        what = "CPU" if self.resource == "cpu" else "memory"
        tried = (
            f"; {self.guest}'s forecast came within {WITHIN:.0%} on {self.within} of the last {self.acted} days "
            "it foresaw a rise"
            if self.acted
            else ""
        )
        return (
            f"predicted: {self.node} at {self.load:.0%} {what} {_when(taken_at, self.at_s)} "
            f"(seen on {self.seen} of the last {self.days} days{tried})"
        )

    @property
    def due(self) -> bool:
        return self.at_s <= self.lead_s


def _when(taken_at: str | None, at_s: float) -> str:
    if taken_at:
        try:
            then = datetime.fromisoformat(taken_at.replace("Z", "+00:00")) + timedelta(seconds=at_s)
        except ValueError:
            pass
        else:
            return f"at {then:%H:%M}"
    return f"in {at_s / 60:.0f} min"


def stalls(snapshot: Snapshot, limits: pressure.Limits) -> tuple[Stall, ...]:
    """Per usable node, the soonest time within the hour when its guests' demand is predicted to
    stall it: CPU contention beyond the limit, or memory use beyond the node's memory limit.
    The demand then is the level now, but for the guests predicted to peak at that time whose
    peak repeats (`MIN_SEEN`), which count at their forecast peak; any other guest counts as it
    is now."""
    settings = snapshot.settings
    forecast_on: dict[str, list[Guest]] = {}
    for g in snapshot.guests:
        if g.forecast is not None:
            forecast_on.setdefault(g.node, []).append(g)
    use = pressure.node_use(snapshot)
    out = []
    for node in (n for n in snapshot.nodes if n.usable and n.name in forecast_on):
        guests = forecast_on[node.name]
        times = sorted({g.forecast.at_s for g in guests if g.forecast is not None})
        for at in times:
            rising = [g for g in guests if g.forecast is not None and g.forecast.at_s == at and _repeats(g.forecast)]
            if not rising:
                continue
            cpu, memory = demand(use[node.name], rising)
            if pressure.cpu_stall(cpu, node) > limits.cpu:
                resource, load = "cpu", cpu / node.cpus
            elif memory > pressure.memory_limit(node, limits):
                resource, load = "memory", memory / node.memory_bytes
            else:
                continue
            top = max(rising, key=lambda g: (g.forecast.cpu - g.cpu_usage) if g.forecast else 0.0)
            assert top.forecast is not None
            largest = max(g.memory_bytes for g in rising)
            lead = settings.round_interval_s + largest / (settings.migration_mib_s * 2**20)
            sids = tuple(g.sid for g in rising)
            f = top.forecast
            out.append(Stall(node.name, resource, at, load, f.seen, f.days, sids, lead, top.sid, f.acted, f.within))
            break
    return tuple(out)


def figures(snapshot: Snapshot, found: tuple[Stall, ...]) -> dict[str, Any]:
    """The forecast's part in a round, for its JSON explanation: the share of running guests whose
    forecast earned its place (the rest are reactive), and each predicted stall (`found`, from
    `stalls`) with the trial of the guest it names."""
    running = [g for g in snapshot.guests if g.running]
    return {
        "active_share": sum(g.forecast is not None for g in running) / len(running) if running else 0.0,
        "within": WITHIN,
        "stalls": [
            {
                "node": s.node,
                "resource": s.resource,
                "at_s": s.at_s,
                "load": s.load,
                "seen": s.seen,
                "days": s.days,
                "guest": s.guest,
                "acted": s.acted,
                "within": s.within,
            }
            for s in found
        ],
    }


def demand(now: pressure.Use, peaking: list[Guest]) -> tuple[float, float]:
    """A node's predicted use, cores and bytes: its use `now`, with each of the `peaking`
    guests raised to its forecast peak (a peak below the guest's use now lowers nothing)."""
    cpu = now.cpu + sum(max(0.0, g.forecast.cpu - g.cpu_usage) for g in peaking if g.forecast)
    memory = now.memory + sum(max(0.0, g.forecast.memory_bytes - g.mem_usage_bytes) for g in peaking if g.forecast)
    return cpu, memory


def node_peaks(snapshot: Snapshot) -> dict[str, tuple[float, float]]:
    """Per usable node with a forecast guest, its CPU and memory use as fractions of its threads
    and memory with every forecast guest of it at its next-hour peak: the most the hour may
    bring whenever each peaks (the live page's marker on the node's bar), where `stalls` counts
    only the guests peaking together and repeating."""
    forecast_on: dict[str, list[Guest]] = {}
    for g in snapshot.guests:
        if g.forecast is not None:
            forecast_on.setdefault(g.node, []).append(g)
    use = pressure.node_use(snapshot)
    out = {}
    for node in (n for n in snapshot.nodes if n.usable and n.name in forecast_on):
        cpu, memory = demand(use[node.name], forecast_on[node.name])
        out[node.name] = (cpu / node.cpus, memory / node.memory_bytes)
    return out


def _repeats(f: Forecast) -> bool:
    """The peak came back day after day: trusted for a plan (`MIN_SEEN`)."""
    return f.seen >= MIN_SEEN and 2 * f.seen > f.days


def barred(snapshot: Snapshot, found: tuple[Stall, ...]) -> frozenset[tuple[str, str]]:
    """(guest, node) pairs no move may make: no guest goes to a node predicted to stall."""
    return frozenset((g.sid, s.node) for s in found for g in snapshot.guests if g.node != s.node)


def foreseen(snapshot: Snapshot, due: tuple[Stall, ...]) -> Snapshot:
    """The snapshot as it is predicted to be at the `due` stalls: their peaking guests at their
    forecast peak, the nodes' usage with them, and the stall contention then predicts (the
    simulator's model) as the pressure of those nodes and their guests. A pressure plan made on
    it moves a guest before the stall rather than after."""
    peaking = {sid for s in due for sid in s.peaking}
    cpu_rise: dict[str, float] = {}
    memory_rise: dict[str, float] = {}
    guests = []
    for g in snapshot.guests:
        f = g.forecast
        if g.sid in peaking and f is not None:
            cpu_rise[g.node] = cpu_rise.get(g.node, 0.0) + max(0.0, f.cpu - g.cpu_usage)
            memory_rise[g.node] = memory_rise.get(g.node, 0.0) + max(0.0, f.memory_bytes - g.mem_usage_bytes)
            g = replace(g, cpu_usage=max(g.cpu_usage, f.cpu), mem_usage_bytes=max(g.mem_usage_bytes, f.memory_bytes))
        guests.append(g)
    nodes = []
    for n in snapshot.nodes:
        if n.name in cpu_rise:
            n = replace(
                n,
                cpu_usage=None if n.cpu_usage is None else n.cpu_usage + cpu_rise[n.name],
                mem_usage_bytes=None if n.mem_usage_bytes is None else n.mem_usage_bytes + memory_rise[n.name],
            )
        nodes.append(n)
    after = replace(snapshot, nodes=tuple(nodes), guests=tuple(guests))
    use = pressure.node_use(after)
    stall = {n.name: pressure.cpu_stall(use[n.name].cpu, n) for n in nodes if n.name in cpu_rise}

    def stalled(p: Pressure | None, node: str) -> Pressure | None:
        if node not in stall:
            return p
        return replace(p or Pressure(), cpu_some=max(p.cpu_some if p else 0.0, stall[node]))

    return replace(
        after,
        nodes=tuple(replace(n, pressure=stalled(n.pressure, n.name)) for n in nodes),
        guests=tuple(replace(g, pressure=stalled(g.pressure, g.node)) for g in guests),
    )
