"""`crs replay`'s forecast accuracy: each guest's next-hour peak from the same hour of past days
(the seasonal baseline) against "as the last hour" (naive)."""

import csv
import gzip
import json

import numpy as np
import pytest

from crs import forecast
from crs.programs.cli import main
from crs.replay import forecast_summary
from crs.sources.trace import load as load_trace

PER_HOUR = 12


def daily(days: int) -> np.ndarray:
    """Two guests at 5-minute samples: one idle but for a 13:00 batch job each day, one flat."""
    hour = np.repeat(np.arange(24 * days) % 24, PER_HOUR)
    return np.vstack([np.where(hour == 13, 4.0, 0.5), np.ones(hour.size)])


def test_a_daily_batch_job_is_foreseen_by_the_seasonal_baseline_not_by_the_naive_one():
    result = forecast.accuracy(daily(3), PER_HOUR)
    assert result is not None and result.forecasts == 2 * 48  # two guests, hours of days 2 and 3
    assert result.seasonal == 0.0
    # naive misses the batch hour (3.5 cores) and the hour after it, twice a day, for one guest
    assert result.naive == pytest.approx(2 * 2 * 3.5 / 96)


def test_the_seasonal_forecast_is_a_high_percentile_of_the_past_days():
    peaks = np.array([[1.0, 2.0, 3.0, 10.0, 0.0]])  # the same hour over four days, then the fifth
    assert forecast.seasonal(peaks, 4, hours_per_day=1)[0] == pytest.approx(np.percentile([1, 2, 3, 10], 90))


def test_a_day_or_less_of_history_is_not_forecast():
    assert forecast.accuracy(daily(1), PER_HOUR) is None
    trace = load_trace()
    assert forecast_summary(trace, 10 * trace.samples) is None  # a looped day is not history


def test_cli_says_a_one_day_trace_is_not_judged(capsys):
    assert main(["replay", "--hours", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["forecast"] is None
    assert main(["replay", "--hours", "1"]) == 0
    assert "forecast: not judged (the replayed trace is not longer than a day)" in capsys.readouterr().out


def test_cli_judges_a_multi_day_trace_directory_day_by_day(tmp_path, capsys):
    """Three VMs over two days in the Bitbrains format: the 13:00 job of VM 1 is foreseen on day 2."""
    usage = daily(2)
    with gzip.open(tmp_path / "usage-two-days.csv.gz", "wt", newline="") as f:
        out = csv.writer(f)
        out.writerow(["vm_id", "timestamp", "cpu_cores", "cpu_usage_pct", "mem_capacity_kb", "mem_usage_kb"])
        for vm, cores in ((1, 4), (2, 2), (3, 2)):
            for i in range(usage.shape[1]):
                used = usage[0, i] if vm == 1 else 1.0
                out.writerow([vm, 1372809600 + 300 * i, cores, used / cores * 100, 8 * 2**20, 2**20])
    argv = ["replay", "--trace", str(tmp_path), "--nodes", "2", "--hot-nodes", "1", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["day"] for d in out["days"]] == [1, 2] and out["rounds"] == 576
    f = out["forecast"]
    assert f["guest_hours"] == 3 * 24
    assert f["cpu_cores"]["seasonal"] == 0.0 < f["cpu_cores"]["naive"]
    assert out["forecast_active_share"] == 0.0  # the product's forecast is on, but none has three days of history
    assert main([*argv[:-1], "--days", "1", "--json"]) == 0
    one_day = json.loads(capsys.readouterr().out)
    assert one_day["rounds"] == 288 and one_day["forecast"] is None
