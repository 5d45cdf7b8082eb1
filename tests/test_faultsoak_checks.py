"""The fault soak's socket check, on made-up timelines: it replaced the idle 10-minute socket
probe in `make test`, so it must fail on what that probe caught (a socket closed every 10-19 s
with no fault near) and pass on the drops a fault explains. And its exit check, on made-up
supervisor logs: a worker that exits by itself on a Redis restart fails it."""

from harness.faultsoak import Fault, exits_row, socket_row

FAULTS = [Fault("SIGKILL web", began=60.0, ended=61.0), Fault("Redis restarted", began=120.0, ended=125.0)]
ROUNDS = [float(t) for t in range(0, 180, 4)]  # a round every 4 s


def test_drops_within_a_fault_and_its_ten_seconds_pass():
    name, measured, ok = socket_row(ROUNDS, [60.5, 70.0, 126.0], FAULTS)
    assert ok, measured
    assert "3 drops, 0 away from faults" in measured


def test_a_socket_closed_every_fifteen_seconds_fails():
    drops = [float(t) for t in range(15, 180, 15)]
    name, measured, ok = socket_row(ROUNDS, drops, FAULTS)
    assert not ok
    assert "away from faults at " in measured  # the times are named


def test_rounds_that_stop_coming_away_from_faults_fail():
    rounds = [t for t in ROUNDS if not 140 < t < 175]  # 36 s without a round, no fault near
    name, measured, ok = socket_row(rounds, [], FAULTS)
    assert not ok
    assert "longest silence away from faults 36.0 s" in measured


def test_a_long_silence_during_a_fault_is_the_fault_s():
    rounds = [t for t in ROUNDS if not 58 < t < 70]  # silent from the web kill to 70 s
    name, measured, ok = socket_row(rounds, [], FAULTS)
    assert ok, measured


KILLED = "supervise: /venv/bin/celery exited with status 137; starting it again in 2 s"
EXITED = "supervise: /venv/bin/celery exited with status 1; starting it again in 2 s"


def test_a_killed_worker_s_restart_passes():
    name, measured, ok = exits_row({"web": [KILLED], "worker1": ["celery@vm ready.", KILLED], "worker2": []})
    assert ok and measured == "other exits: none"


def test_a_worker_that_exits_by_itself_fails_and_is_named():
    name, measured, ok = exits_row({"web": [], "worker1": [KILLED], "worker2": ["Unrecoverable error", EXITED]})
    assert not ok
    assert "worker2: status 1;" in measured
