"""Each cluster's rounds at a phase of its own (dashboard/beat.py): beat queues an even stream
of collects, not every cluster's in one tick, and a late or missed run is not made up twice."""

from datetime import UTC, datetime, timedelta

import pytest
from django_celery_beat.models import PeriodicTask

from dashboard.beat import PhasedEntry, phase_of, phased
from dashboard.models import Cluster
from dashboard.signals import schedule_name

START = datetime(2026, 11, 28, 5, 0, tzinfo=UTC)


def at(seconds: float):
    return lambda: START + timedelta(seconds=seconds)


def next_run(schedule: phased, last: float) -> float:
    """Seconds after START of the schedule's next run, its last run `last` seconds after START."""
    state = schedule.is_due(START + timedelta(seconds=last))
    now = schedule.now()
    return (now - START).total_seconds() + (0 if state.is_due else state.next)


def test_clusters_started_together_run_spread_over_the_interval():
    """200 clusters whose schedules were made at one instant (beat's start): one interval later
    their collects fall across the whole interval, at most a few in any tenth of it."""
    every = 5.0
    runs = [next_run(phased(every, phase_of(pk, every), nowfun=at(0.0)), last=0.0) for pk in range(1, 201)]
    tenths = [sum(1 for t in runs if k * every / 10 <= t % every < (k + 1) * every / 10) for k in range(10)]
    assert max(tenths) <= 24, tenths  # an even spread is 20 a tenth; all in one tick was 200
    assert all(every / 2 <= t <= every * 1.5 for t in runs)


def test_an_overdue_schedule_runs_now_then_falls_back_into_its_slot():
    every, phase = 5.0, 1.25
    late = phased(every, phase, nowfun=at(60.3))  # beat was away for a minute
    assert late.is_due(START).is_due
    after = phased(every, phase, nowfun=at(60.3))
    assert next_run(after, last=60.3) == pytest.approx(66.25)  # its slot again, not 65.3


def test_a_late_run_is_not_followed_by_a_second_at_once():
    every, phase = 5.0, 1.0
    schedule = phased(every, phase, nowfun=at(9.0))
    # ran at 8.0 (2 s late for the slot at 6.0): the slot at 11.0 is next, not the one at 6 or 11 - 5
    assert not schedule.is_due(START + timedelta(seconds=8.0)).is_due
    assert next_run(schedule, last=8.0) == pytest.approx(11.0)
    # ran at 3.4 (2.4 s late for 1.0, just under half an interval): 6.0 is still its next slot
    assert next_run(phased(every, phase, nowfun=at(4.0)), last=3.4) == pytest.approx(6.0)


def test_beat_reads_a_clusters_interval_as_a_phased_schedule(cluster):
    """The rows the settings make (dashboard/signals.py) become phased entries, each cluster at
    its own phase; the interval is the cluster's round interval."""
    other = Cluster.objects.create(name="other")
    entries = [PhasedEntry(PeriodicTask.objects.get(name=schedule_name(c.pk))) for c in (cluster, other)]
    assert all(isinstance(e.schedule, phased) for e in entries)
    assert [e.schedule.seconds for e in entries] == [cluster.policy.round_interval_s, other.policy.round_interval_s]
    assert entries[0].schedule.phase != entries[1].schedule.phase
