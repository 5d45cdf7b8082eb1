"""`python -m crs replay`: a trace day through the engine, as an admin comparing policies sees it."""

import json
import re

import pytest

from crs.cli import main
from crs.model import Settings
from crs.replay import Migration, ping_pongs, replay, summary

DYNAMIC = Settings(mode="dynamic")


@pytest.fixture(scope="module")
def day():
    return replay({}, DYNAMIC, 288)


@pytest.mark.parametrize("mode", ["dynamic", "static"])
def test_demo_cluster_suggests_a_move_once_the_default_hold_duration_has_passed(mode):
    # default policy: threshold 0.3 (normalized), hold 3 rounds, margin 10 %
    result = replay({}, Settings(mode=mode), 3)
    assert all(value > 0.3 for value in result.imbalance)
    assert result.decisions == ("holding", "holding", "migrate")


def test_a_trace_day_is_balanced_by_a_few_migrations(day):
    out = summary(day)
    assert out["rounds"] == 288 and out["trace_hours"] == 24
    assert day.imbalance[0] > 0.4
    assert out["imbalance"]["p50"] < 0.3 < out["imbalance"]["max"]
    assert 3 <= out["migrations"]["done"] <= 40
    assert out["share_above_threshold"] < 0.5


def test_no_migration_starts_while_another_is_in_flight(day):
    # a guest being migrated holds the next round (Proxmox's "motion in flight" gate)
    starts = [m.started_s for m in day.migrations]
    assert len(starts) == len(set(starts))


def test_failing_migrations_leave_the_cluster_unbalanced():
    result = replay({"fail_rate": 1.0}, DYNAMIC, 48)
    out = summary(result)
    assert out["migrations"]["failed"] >= 2 and out["migrations"]["done"] == 0
    assert out["share_above_threshold"] == 1.0


def test_ping_pong_is_a_move_undone_within_an_hour():
    there = Migration("vm:1", "a", "b", 0.0, "done")
    back_soon = Migration("vm:1", "b", "a", 3000.0, "done")
    back_late = Migration("vm:1", "b", "a", 3700.0, "done")
    back_failed = Migration("vm:1", "b", "a", 600.0, "failed")
    onwards = Migration("vm:1", "b", "c", 600.0, "done")
    assert ping_pongs((there, back_soon)) == [(there, back_soon)]
    assert ping_pongs((there, back_late)) == []
    assert ping_pongs((there, back_failed)) == []
    assert ping_pongs((there, onwards)) == []


def test_cli_prints_quantiles_share_migrations_and_ping_pongs(capsys):
    assert main(["replay", "--hours", "2"]) == 0
    out = capsys.readouterr().out
    assert "replay: 24 rounds, 2.0 h of trace" in out
    assert "imbalance  p50 " in out and " p90 " in out and " p99 " in out and " max " in out
    assert "above threshold 0.3: " in out
    assert "ping-pong moves (A→B→A within an hour): 0" in out


def test_cli_json_compares_two_policies(capsys):
    assert main(["replay", "--hours", "6", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["replay", "--hours", "6", "--json", "--margin", "0.5"]) == 0
    strict = json.loads(capsys.readouterr().out)
    assert default["settings"]["margin"] == 0.1 and strict["settings"]["margin"] == 0.5
    assert strict["migrations"]["started"] < default["migrations"]["started"]
    assert strict["imbalance"]["p50"] > default["imbalance"]["p50"]


def test_html_report_is_self_contained(tmp_path, capsys):
    path = tmp_path / "report.html"
    assert main(["replay", "--hours", "1", "--html", str(path)]) == 0
    html = path.read_text()
    assert "Plotly" in html and len(html) > 1_000_000  # plotly.js itself is in the file
    assert re.search(r"<script[^>]*\ssrc=", html) is None  # nothing fetched on opening
    assert "threshold 0.3" in html


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--threshold", "-1"], "settings.threshold: -1.0 is out of range; must be >= 0"),
        (["--nodes", "1"], "simulator.nodes: 1 is not a whole number 2..500"),
        (["--hours", "0.001"], "--rounds/--hours: 0 rounds; must be at least 1"),
    ],
)
def test_bad_options_are_refused_naming_them(argv, message, capsys):
    assert main(["replay", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--hours", "0"], "argument --hours: '0' is not a number > 0"),
        (["--rounds", "1.5"], "argument --rounds: '1.5' is not a whole number >= 1"),
        (["--cooldown", "-1"], "argument --cooldown: '-1' is not a number >= 0"),
        (["--samples-per-round", "nan"], "argument --samples-per-round: 'nan' is not a number > 0"),
    ],
)
def test_bad_command_line_options_are_argparse_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["replay", *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ") and message in err


def test_cooldown_keeps_a_migrated_guest_put_for_its_duration():
    aggressive = Settings(mode="dynamic", threshold=0.05, hold_duration=0, margin=0.0)
    config = {"nodes": 6, "hot_nodes": 2}
    hour = 3600.0

    def quickest_second_move(result):
        last: dict[str, float] = {}
        gaps = []
        for m in result.migrations:
            if m.sid in last:
                gaps.append(m.started_s - last[m.sid])
            last[m.sid] = m.ended_s or m.started_s
        return min(gaps, default=float("inf"))

    free = replay(config, aggressive, 60, cooldown_s=0.0)
    rested = replay(config, aggressive, 60, cooldown_s=hour)
    assert quickest_second_move(free) < hour  # without a cooldown guests move again soon
    assert quickest_second_move(rested) > hour
