"""The forecast in plans (`settings.forecast`): a pressure move ahead of a predicted stall, no
move onto a node predicted to stall within the hour, and a guest with less than a day of
history not forecast at all."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from crs import forecast, snapshot
from crs.balancer import run_round
from crs.decision import RoundState
from crs.errors import SnapshotError
from crs.pressure import Limits
from crs.programs.cli import main

FIXTURE = Path(__file__).parent / "fixtures" / "forecast" / "node03-peak-at-1325.json"
PER_DAY = 288
TAKEN = 1372857600.0  # the fixture's taken_at, 2013-07-03 13:20 UTC
QUIET = RoundState(checked_s=TAKEN - 120, changed_s=TAKEN - 120)  # the pressure moves' quiet minute passed


def peak_file():
    """node03's four guests use 8 of its 16 threads now and are predicted at 18.8 at 13:25 (seen
    on 5 of 5 days); node02 at 19 at 14:00; node01 has no forecast and room."""
    return snapshot.load_file(FIXTURE)


def test_a_pressure_move_is_made_ahead_of_a_predicted_stall_and_says_so():
    snap = peak_file()
    result = run_round(snap, QUIET)
    assert result.decision == "migrate"
    assert {s.move.source for s in result.plan} == {"node03"} and {s.move.target for s in result.plan} == {"node01"}
    assert result.explanation.reason.startswith(
        "Predicted: node03 at 118% CPU at 13:25 (seen on 5 of the last 5 days). vm:30"
    )
    off = run_round(snap.with_settings(replace(snap.settings, forecast="off")), QUIET)
    assert off.decision != "migrate" and "Predicted" not in off.explanation.reason  # nothing stalls yet


def test_a_stall_further_off_than_a_round_and_a_migration_waits():
    snap = peak_file()
    later = replace(
        snap,
        guests=tuple(
            replace(g, forecast=replace(g.forecast, at_s=1800)) if g.node == "node03" else g for g in snap.guests
        ),
    )
    result = run_round(later, QUIET)
    assert result.decision != "migrate"
    assert "No move onto node02, node03: predicted: node02 at 119% CPU at 14:00" in result.explanation.reason
    assert "node03 at 118% CPU at 13:50 (seen on 5 of the last 5 days)." in result.explanation.reason


def test_no_balancing_move_targets_a_node_predicted_to_stall_within_the_hour():
    snap = peak_file()
    settings = replace(snap.settings, objective="even", threshold=0.0, hold_duration=0, margin=0.0)
    # node02 (3 + 3 cores of 16) is the emptiest target after node01; crowd node01 so it is the busiest
    crowded = replace(snap, guests=tuple(replace(g, cpu_usage=6.0) if g.node == "node01" else g for g in snap.guests))
    on = run_round(crowded.with_settings(settings), QUIET)
    off = run_round(crowded.with_settings(replace(settings, forecast="off")), QUIET)
    assert "node02" in {s.move.target for s in off.plan}
    assert on.plan and not {"node02", "node03"} & {s.move.target for s in on.plan}


def test_the_cli_takes_the_forecast_from_the_file_or_the_flag(capsys):
    assert main(["plan", str(FIXTURE), "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["decision"] == "migrate" and "node03 at 118% CPU" in planned["explanation"]["reason"]
    assert main(["plan", str(FIXTURE), "--forecast", "off", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["decision"] != "migrate"


def test_the_forecast_keys_are_checked_and_round_trip():
    raw = json.loads(FIXTURE.read_text())
    snap = snapshot.parse(raw)
    assert snapshot.parse(snapshot.to_dict(snap)) == snap
    assert snap.guest("vm:101").forecast is None and "forecast" not in snapshot.to_dict(snap)["guests"][4]
    raw["guests"][0]["forecast"]["seen"] = 6
    with pytest.raises(SnapshotError, match=r"guests\[0\]\.forecast\.seen: 6 is not a whole number 0\.\.5"):
        snapshot.parse(raw)
    raw["settings"]["forecast"] = "yes"
    with pytest.raises(SnapshotError, match="settings.forecast: 'yes' is not one of off, on"):
        snapshot.parse(raw)


def test_presets_product_on_proxmox_off():
    assert snapshot.parse_settings({"preset": "product"}).forecast == "on"
    assert snapshot.parse_settings({}).forecast == "off"


def daily_job(days):
    """One guest idle at 0.5 cores but for a 13:00-13:59 job at 4 cores each day; one flat at 1."""
    hour = np.repeat(np.arange(24 * days) % 24, 12)
    return np.vstack([np.where(hour == 13, 4.0, 0.5), np.ones(hour.size)])


def test_a_guest_with_less_than_three_days_of_history_is_not_forecast():
    cpu = daily_job(4)
    assert forecast.next_hour(cpu, cpu, 3 * PER_DAY - 2, PER_DAY, 300.0) == [None, None]
    assert forecast.next_hour(cpu, cpu, 3 * PER_DAY + 13 * 12 - 3, PER_DAY, 300.0)[0] is not None


def test_the_daily_job_is_forecast_at_its_hour_with_the_days_that_saw_it_and_its_trial():
    cpu = daily_job(4)
    before_job = 3 * PER_DAY + 13 * 12 - 3  # 12:45 on day 4: the job starts in 15 minutes
    job, flat = forecast.next_hour(cpu, cpu * 2**30, before_job, PER_DAY, 300.0)
    assert (job.cpu, job.at_s, job.seen, job.days) == (4.0, 900.0, 3, 3)
    assert job.memory_bytes == 4.0 * 2**30
    # day 3 foresaw the job from two days (day 2 from one day only, which no plan trusts), exactly
    assert (job.acted, job.within) == (1, 1)
    assert flat is None  # a flat guest's forecast never foretold a rise: the round is reactive for it


def stopped_job(days):
    """The 13:00 job ran on days 1-3, then stopped: its forecast keeps foretelling it."""
    cpu = daily_job(days)
    cpu[0, 3 * PER_DAY :] = 0.5
    return cpu


def test_a_forecast_that_lost_to_the_naive_one_on_its_last_days_is_not_used():
    cpu = stopped_job(6)
    tried = forecast.trial(cpu, cpu, 5 * PER_DAY + 13 * 12 - 3, PER_DAY, 12)
    # days 4 and 5 foretold a job that did not come (3.5 cores off; the last hour said 0.5, right)
    assert tried.acted[0] == 3 and tried.within[0] == 1 and tried.error[0] == 7.0 > tried.naive[0] == 3.5
    assert forecast.next_hour(cpu, cpu, 5 * PER_DAY + 13 * 12 - 3, PER_DAY, 300.0) == [None, None]


def test_a_forecast_closer_than_the_naive_one_but_seldom_within_10_percent_is_not_used():
    cpu = daily_job(6)
    cpu[0, 3 * PER_DAY :] = np.where(cpu[0, 3 * PER_DAY :] > 1, 3.0, 0.5)  # from day 4 the job takes 3 cores
    now = 5 * PER_DAY + 13 * 12 - 3
    tried = forecast.trial(cpu, cpu, now, PER_DAY, 12)
    assert (tried.acted[0], tried.within[0], tried.error[0], tried.naive[0]) == (3, 1, 2.0, 8.5)
    assert forecast.next_hour(cpu, cpu, now, PER_DAY, 300.0)[0] is None


def test_with_no_forecast_earning_its_place_on_is_exactly_off():
    snap = peak_file()
    cpu = stopped_job(6)
    lost = forecast.next_hour(cpu, cpu, 5 * PER_DAY + 13 * 12 - 3, PER_DAY, 300.0)
    reactive = replace(snap, guests=tuple(replace(g, forecast=lost[0]) for g in snap.guests))
    on = run_round(reactive, QUIET)
    off = run_round(reactive.with_settings(replace(snap.settings, forecast="off")), QUIET)
    assert on.explanation.forecast == {"active_share": 0.0, "within": 0.1, "stalls": []}
    assert replace(on, explanation=replace(on.explanation, forecast=None)) == off and snap.settings.forecast == "on"


def with_forecasts(snap, **fields):
    """`snap` with `fields` set in every guest's forecast."""
    return replace(
        snap, guests=tuple(replace(g, forecast=replace(g.forecast, **fields)) if g.forecast else g for g in snap.guests)
    )


def test_a_forecast_driven_move_says_how_the_guests_forecast_has_done():
    snap = peak_file()
    tried = with_forecasts(snap, acted=5, within=4)
    explanation = run_round(tried, QUIET).explanation
    assert explanation.reason.startswith("Predicted: node03 at 118% CPU at 13:25 (seen on 5 of the last 5 days; vm:")
    assert "'s forecast came within 10% on 4 of the last 5 days it foresaw a rise). vm:" in explanation.reason
    figures = explanation.forecast
    forecast_of = sum(g.forecast is not None for g in snap.guests if g.running)
    assert figures["active_share"] == forecast_of / sum(g.running for g in snap.guests) < 1
    stall = next(s for s in figures["stalls"] if s["node"] == "node03")
    assert (stall["at_s"], stall["acted"], stall["within"], figures["within"]) == (300.0, 5, 4, 0.1)
    assert stall["guest"] in explanation.reason


def test_a_peak_seen_on_one_day_only_moves_nothing():
    snap = peak_file()
    once = with_forecasts(snap, seen=1, days=5)
    result = run_round(once, QUIET)
    assert result.decision != "migrate" and "Predicted" not in result.explanation.reason
    assert forecast.stalls(once, Limits()) == ()


def test_a_forecast_beyond_the_trace_or_within_its_first_day_is_none():
    cpu = daily_job(4)
    assert forecast.next_hour(cpu, cpu, cpu.shape[1], PER_DAY, 300.0) == [None, None]
