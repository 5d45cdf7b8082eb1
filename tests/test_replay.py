"""`python -m crs replay`: a trace day through the engine, as an admin comparing policies sees it."""

import csv
import gzip
import json
import re

import pytest

from crs.model import Settings
from crs.programs.cli import main
from crs.replay import Migration, ping_pongs, replay, summary
from crs.sources.base import SourceError
from crs.sources.trace import load as load_trace

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
    assert "replay of bitbrains: 24 rounds, 2.0 h of trace" in out
    assert "imbalance  p50 " in out and " p90 " in out and " p99 " in out and " max " in out
    assert "above threshold 0.3: " in out
    assert "ping-pong moves (A→B→A within an hour): 0 (0.0 a day)" in out
    assert re.search(r"\d+ a day, [\d.]+ GiB moved a day", out)
    assert re.search(r"most moves of one guest: \d+ \(vm:\d+\)", out)


def test_cli_json_compares_two_policies(capsys):
    assert main(["replay", "--hours", "6", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["replay", "--hours", "6", "--json", "--margin", "0.9"]) == 0  # no plan gains 90 %
    strict = json.loads(capsys.readouterr().out)
    assert default["settings"]["margin"] == 0.1 and strict["settings"]["margin"] == 0.9
    assert strict["migrations"]["started"] < default["migrations"]["started"]
    assert strict["imbalance"]["p50"] > default["imbalance"]["p50"]


def test_html_report_is_self_contained(tmp_path, capsys):
    path = tmp_path / "report.html"
    assert main(["replay", "--hours", "1", "--html", str(path)]) == 0
    html = path.read_text()
    assert "Plotly" in html and len(html) > 1_000_000  # plotly.js itself is in the file
    assert re.search(r"<script[^>]*\ssrc=", html) is None  # nothing fetched on opening
    assert "threshold 0.3" in html
    assert "Per day" in html and "guest-minutes under pressure" in html and "rounds above threshold" in html
    assert "moves paid" in html


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


def test_a_short_slice_reports_rates_per_day_and_the_busiest_guest():
    # two hours of the Bitbrains day: the crowded start moves a few guests
    result = replay({}, DYNAMIC, 24)
    out = summary(result)
    moved = list(result.migrations)
    assert moved, "the crowded start must move something within two hours"
    assert out["migrations"]["per_day"] == len(moved) * 12
    sizes = dict(zip((f"vm:{i}" for i in load_trace().vm_ids), load_trace().memory_bytes))
    assert out["gib_moved_per_day"] == pytest.approx(sum(sizes[m.sid] for m in moved) / 2**30 * 12)
    most = out["most_moves_of_one_guest"]
    assert most["moves"] == max(sum(m.sid == sid for m in moved) for sid in {m.sid for m in moved})
    assert sum(m.sid == most["guest"] for m in moved) == most["moves"]
    settled = result.imbalance[12:]  # rounds of the second hour
    assert out["share_within_threshold_after_first_hour"] == sum(v <= 0.3 for v in settled) / 12
    assert out["ping_pongs_per_day"] == out["ping_pongs"] * 12


def test_a_replay_of_one_hour_has_no_share_after_the_first_hour(capsys):
    assert summary(replay({}, DYNAMIC, 12))["share_within_threshold_after_first_hour"] is None
    assert main(["replay", "--hours", "1"]) == 0
    assert "at or below threshold after the first hour: - (the replay is not longer than an hour)" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("name, vms", [("planetlab", 1052), ("google", 800)])
def test_traces_without_sizes_take_real_bitbrains_sizes_the_same_on_every_run(name, vms):
    trace = load_trace(name)
    donors = load_trace()
    real = set(zip(donors.cores, donors.memory_bytes))
    assert len(trace.vm_ids) == vms and trace.samples == 288
    assert set(zip(trace.cores, trace.memory_bytes)) <= real
    assert len(set(zip(trace.cores, trace.memory_bytes))) > 50  # drawn, not one size for all
    assert (trace.cpu_usage <= trace.cores[:, None] + 1e-9).all()
    if name == "google":  # percent of the drawn size
        assert (trace.mem_usage_bytes <= trace.memory_bytes[:, None]).all()
    again = load_trace.__wrapped__(name)  # uncached: a second read draws the same sizes
    assert (again.cores == trace.cores).all() and (again.memory_bytes == trace.memory_bytes).all()


@pytest.mark.parametrize("name", ["planetlab", "google"])
def test_cli_replays_the_other_traces(name, capsys):
    assert main(["replay", "--trace", name, "--hours", "2", "--nodes", "24", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trace"] == name and out["rounds"] == 24
    assert out["imbalance"]["max"] > 0.3  # the crowded start of a busy trace is out of balance


def test_cli_refuses_a_trace_it_cannot_read_naming_the_formats(tmp_path, capsys):
    assert main(["replay", "--trace", str(tmp_path), "--hours", "1"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "planetlab-*.csv" in err and "vms-*.csv.gz" in err
    assert "bitbrains, planetlab, google, bitbrains-2013-07" in err


def write_sized_wide(path, rows):
    header = ["vm_id", "cores", "memory_mib", "metric"] + [f"s{i:04d}" for i in range(len(rows[0]) - 4)]
    with gzip.open(path, "wt", newline="") as f:
        csv.writer(f).writerows([header, *rows])


def test_a_sized_wide_trace_keeps_each_vms_own_size_and_usage(tmp_path):
    write_sized_wide(
        tmp_path / "vms-week.csv.gz",
        [
            [7, 4, 8192, "mem_mib", 1024, 2048, 512],
            [7, 4, 8192, "cpu_pct", 50, 100, 25],
            [3, 2, 1024, "cpu_pct", 10, 0, 100],
            [3, 2, 1024, "mem_mib", 100, 200, 300],
        ],
    )
    trace = load_trace.__wrapped__(tmp_path)
    assert trace.vm_ids == (3, 7) and trace.samples == 3
    assert list(trace.cores) == [2, 4] and list(trace.memory_bytes) == [2**30, 8 * 2**30]
    assert trace.cpu_usage.tolist() == [[0.2, 0.0, 2.0], [2.0, 4.0, 1.0]]
    assert trace.mem_usage_bytes[1].tolist() == [2**30, 2 * 2**30, 2**29]


@pytest.mark.parametrize(
    "rows, message",
    [
        ([[1, 2, 1024, "disk_pct", 1], [1, 2, 1024, "cpu_pct", 1]], "metric 'disk_pct' of 1; allowed: cpu_pct"),
        ([[1, 2, 1024, "cpu_pct", 1]], "VM 1 lacks a cpu_pct or mem_mib row"),
        ([[1, 0, 1024, "cpu_pct", 1], [1, 0, 1024, "mem_mib", 1]], "VM 1 has no cores or memory"),
    ],
    ids=["metric", "lacks-row", "no-cores"],
)
def test_a_bad_sized_wide_trace_is_refused_naming_what(tmp_path, rows, message):
    write_sized_wide(tmp_path / "vms-bad.csv.gz", rows)
    with pytest.raises(SourceError, match=re.escape(message)):
        load_trace.__wrapped__(tmp_path)


def test_help_says_where_missing_vm_sizes_come_from(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    assert "Bitbrains VM drawn with a fixed seed" in capsys.readouterr().out


def test_replay_time_is_true_by_default(day):
    # a round covers one 5-minute sample and a migration its real seconds inside it: every one is
    # done by the next round; with 10-s rounds each 5-minute sample, the big ones span several
    done = [m for m in day.migrations if m.outcome == "done"]
    assert done and all(m.ended_s - m.started_s == 300 for m in done)
    fast = replay({"round_interval_s": 10.0}, DYNAMIC, 36)
    assert max(m.ended_s - m.started_s for m in fast.migrations if m.outcome == "done") > 300


def test_json_reports_each_trace_day(capsys):
    assert main(["replay", "--days", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rounds"] == 288
    (only,) = out["days"]
    assert only["day"] == 1 and only["rounds"] == 288
    assert only["migrations"] == out["migrations"]["started"]
    assert only["rounds_above_threshold"] == out["share_above_threshold"]
    assert only["gib_moved"] == pytest.approx(out["gib_moved_per_day"])
    assert only["guest_minutes_under_pressure"] == out["guest_minutes_under_pressure"]
    assert only["moves_paid"] == out["moves_paid"]


def test_moves_paid_are_counted_per_day_and_in_total(day):
    out = summary(day)
    total = out["moves_paid"]
    assert 0 < total["judged"] <= out["migrations"]["done"]  # a move whose hour outlasts the replay is not judged
    assert total["paid"] <= total["judged"] and total["share"] == total["paid"] / total["judged"]
    for key in ("judged", "paid"):
        assert sum(d["moves_paid"][key] for d in out["days"]) == total[key]
        assert sum(o[key] for o in total["by_objective"].values()) == total[key]
    judged = [m for m in day.migrations if m.paid is not None]
    assert all(m.outcome == "done" and 0 < m.horizon_s and m.ended_s + m.horizon_s <= day.trace_s[-1] for m in judged)


def test_days_of_a_looped_replay_are_counted_apart():
    result = replay({}, DYNAMIC, 288 + 24)
    first, second = summary(result)["days"]
    assert (first["rounds"], second["rounds"]) == (288, 24)
    assert first["migrations"] + second["migrations"] == len(result.migrations)


def test_days_beyond_the_trace_are_refused(capsys):
    assert main(["replay", "--days", "2"]) == 2
    assert "--days: 2 days; this trace has 1" in capsys.readouterr().err


def test_list_traces_names_each_with_days_vms_and_step(capsys):
    assert main(["replay", "--list-traces", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {(r["trace"], r["vms"], r["sample_s"]) for r in rows} >= {
        ("bitbrains", 416, 300),
        ("planetlab", 1052, 300),
        ("google", 800, 300),
        ("bitbrains-2013-07", 423, 300),
        ("bitbrains-2013-08", 498, 300),
        ("bitbrains-2013-09", 498, 300),
    }
    assert {r["days"] for r in rows if r["trace"].startswith("bitbrains-2013")} == {8}
    assert all(r["days"] >= 1 for r in rows)
    assert main(["replay", "--list-traces"]) == 0
    assert re.search(r"google\s+1\s+800\s+300s", capsys.readouterr().out)


def test_a_cluster_short_of_cpu_at_peaks_is_told_with_its_hours_and_the_node_to_add(capsys):
    # the Bitbrains day on 6 nodes (48 + 16 + 8 threads, twice): the peaks want more than all threads
    assert main(["replay", "--nodes", "6", "--json"]) == 0
    (cpu,) = json.loads(capsys.readouterr().out)["shortfall"]
    assert cpu["resource"] == "cpu" and cpu["have"] == 144 and cpu["add"] == {"nodes": 1, "size": 48}
    # one line: how short, on how many days, at which hours (its three short rounds 13:25, 17:15, 20:45)
    assert cpu["text"] == "short of 38 cores at peaks on 1 of 1 day, mostly 13:00–21:00; add a node of 48 threads"
    assert [s for s, _ in cpu["spans_s"]] == [13 * 3600 + 25 * 60, 17 * 3600 + 15 * 60, 20 * 3600 + 45 * 60]
    assert main(["replay", "--hours", "2"]) == 0  # 12 nodes: enough at every round
    assert "the cluster as a whole had the CPU and memory at every round" in capsys.readouterr().out
