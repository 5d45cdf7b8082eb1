"""Change windows and blackouts (crs.windows): across midnight, across DST changes, with blackouts."""

from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

from crs.coexistence import parse_crs
from crs.windows import Blackout, Window, gate, next_occurrence

BERLIN = ZoneInfo("Europe/Berlin")
FRI, SAT, SUN = 4, 5, 6
NIGHTS = Window(frozenset({FRI}), time(22, 0), time(6, 0))  # Friday 22:00 to Saturday 06:00


def at(*args, zone=BERLIN):
    return datetime(*args, tzinfo=zone)


def test_window_past_midnight_is_open_on_both_days_and_closed_after():
    # 2026-11-20 is a Friday
    assert not gate(at(2026, 11, 20, 21, 59), BERLIN, (NIGHTS,)).open
    assert gate(at(2026, 11, 20, 23, 30), BERLIN, (NIGHTS,)).open
    saturday_night = gate(at(2026, 11, 21, 5, 59), BERLIN, (NIGHTS,))
    assert saturday_night.open and saturday_night.until == at(2026, 11, 21, 6, 0)
    assert not gate(at(2026, 11, 21, 6, 0), BERLIN, (NIGHTS,)).open
    # Sunday 01:00 is past midnight of Saturday, which is not a start day
    assert not gate(at(2026, 11, 22, 1, 0), BERLIN, (NIGHTS,)).open


def test_paused_until_names_the_next_opening_a_week_ahead():
    paused = gate(at(2026, 11, 21, 12, 0), BERLIN, (NIGHTS,))
    assert (paused.open, paused.reason) == (False, "window")
    assert paused.until == at(2026, 11, 27, 22, 0)


def test_window_across_the_autumn_dst_change_keeps_wall_clock_and_lasts_nine_hours():
    # Berlin leaves summer time on Sunday 2026-10-25 at 03:00 CEST (→ 02:00 CET).
    saturday = Window(frozenset({SAT}), time(22, 0), time(6, 0))
    opening = gate(at(2026, 10, 24, 12, 0), BERLIN, (saturday,)).until
    assert opening == datetime(2026, 10, 24, 20, 0, tzinfo=UTC)  # 22:00 CEST
    closing = gate(opening, BERLIN, (saturday,)).until
    assert closing == datetime(2026, 10, 25, 5, 0, tzinfo=UTC)  # 06:00 CET
    assert (closing - opening).total_seconds() == 9 * 3600
    # inside, in the hour that happens twice
    assert gate(datetime(2026, 10, 25, 0, 30, tzinfo=UTC), BERLIN, (saturday,)).open
    assert gate(datetime(2026, 10, 25, 1, 30, tzinfo=UTC), BERLIN, (saturday,)).open


def test_window_across_the_spring_dst_change_lasts_seven_hours():
    # Berlin enters summer time on Sunday 2026-03-29 at 02:00 CET (→ 03:00 CEST).
    saturday = Window(frozenset({SAT}), time(22, 0), time(6, 0))
    opening = gate(at(2026, 3, 28, 12, 0), BERLIN, (saturday,)).until
    closing = gate(opening, BERLIN, (saturday,)).until
    assert opening == datetime(2026, 3, 28, 21, 0, tzinfo=UTC)  # 22:00 CET
    assert closing == datetime(2026, 3, 29, 4, 0, tzinfo=UTC)  # 06:00 CEST
    assert (closing - opening).total_seconds() == 7 * 3600


def test_a_week_later_the_same_window_opens_an_hour_earlier_in_utc():
    # Friday 22:00 Berlin is 21:00 UTC in winter and 20:00 UTC in summer
    before = gate(at(2026, 3, 21, 12, 0), BERLIN, (NIGHTS,)).until
    after = gate(at(2026, 3, 28, 12, 0), BERLIN, (NIGHTS,)).until
    assert before.astimezone(UTC).hour == 21 and after.astimezone(UTC).hour == 20


def test_blackout_closes_an_open_window_and_says_why_and_until_when():
    backups = Blackout(at(2026, 11, 21, 1, 0), at(2026, 11, 21, 4, 0), "backups")
    during = gate(at(2026, 11, 21, 2, 0), BERLIN, (NIGHTS,), (backups,))
    assert (during.open, during.reason, during.label) == (False, "blackout", "backups")
    assert during.until == at(2026, 11, 21, 4, 0)  # the window is open again after it
    assert gate(at(2026, 11, 21, 4, 0), BERLIN, (NIGHTS,), (backups,)).open


def test_without_windows_automation_runs_at_any_time_except_blackouts():
    assert gate(at(2026, 11, 23, 15, 0), BERLIN, ()).open
    assert gate(at(2026, 11, 23, 15, 0), BERLIN, ()).until is None
    backups = Blackout(at(2026, 11, 29, 1, 0), at(2026, 11, 29, 4, 0), "backups")
    before = gate(at(2026, 11, 28, 15, 0), BERLIN, (), (backups,))
    assert before.open and before.until == at(2026, 11, 29, 1, 0)


def test_next_occurrence_is_the_running_one_or_the_next():
    start, end = next_occurrence(NIGHTS, at(2026, 11, 21, 3, 0), BERLIN)
    assert (start, end) == (at(2026, 11, 20, 22, 0), at(2026, 11, 21, 6, 0))
    start, _ = next_occurrence(NIGHTS, at(2026, 11, 21, 7, 0), BERLIN)
    assert start == at(2026, 11, 27, 22, 0)


def test_proxmox_crs_options_in_percent_and_in_fractions_read_as_fractions():
    new = parse_crs("ha=dynamic,ha-auto-rebalance=1,ha-auto-rebalance-threshold=30,ha-auto-rebalance-margin=10")
    assert (new.threshold, new.margin, new.unit, new.rebalancing) == (0.3, 0.1, "percent", True)
    old = parse_crs("ha=static,ha-auto-rebalance=1,ha-auto-rebalance-threshold=0.25,ha-auto-rebalance-hold-duration=5")
    assert (old.threshold, old.margin, old.hold_duration, old.unit) == (0.25, 0.1, 5.0, "fraction")
    assert parse_crs({"ha": "static", "ha-rebalance-on-start": 1}).rebalance_on_start
    basic = parse_crs("ha=basic,ha-auto-rebalance=1")  # the manager ignores auto-rebalance in basic mode
    assert basic.auto_rebalance and not basic.rebalancing
    assert parse_crs(None) == parse_crs("")
    assert (parse_crs(None).mode, parse_crs(None).unit) == ("basic", "default")
