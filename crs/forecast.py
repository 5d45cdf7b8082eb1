"""How well each guest's own history foretells its next hour: the seasonal baseline.

Workloads repeat by the day (backups, batch jobs, office hours), so a guest's peak in
the coming hour is forecast from its peaks in the same hour of the past days, at a high
percentile rather than the mean: a forecast that misses the peak misses the stall. The
measure is the mean absolute error of each guest's next-hour peak, beside the naive
forecast "the next hour peaks as the last one did". A guest with less history than one
day (one season) is not forecast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
