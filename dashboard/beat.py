"""Beat's scheduler: django-celery-beat's, with each cluster's rounds at a phase of its own.

Celery's interval schedule is due one interval after the last run. Schedules made together
(every cluster at beat's start, or after beat or the database was away) come due together
and stay in step: every interval beat queued every cluster's collect in one tick, the queue
jumped to 30-60 messages and the last of them ran seconds late (bench/many_clusters.py: p99
lateness 3.7 s at 30 clusters on two cores sitting at load 0.1). Here a schedule runs on
fixed slots, phase + k × interval on the clock, with the phase spread by the golden ratio
over the interval: after any outage the clusters fall back into their own slots by the
second round, and the worker sees an even stream instead of bursts.
"""

import math
import zlib

from celery import schedules
from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry

GOLDEN = (math.sqrt(5) - 1) / 2  # consecutive keys land far apart, and so do the next ones


def phase_of(key: int, every: float) -> float:
    """Seconds into each interval at which schedule `key` runs."""
    return (key * GOLDEN) % 1.0 * every


class phased(schedules.schedule):
    """An interval schedule on fixed slots (`phase` + k × `run_every`, in seconds since the
    epoch). The next run is the first slot at least half an interval after the last one, so a
    late run is never followed by a second one at once, and an overdue one runs now."""

    def __init__(self, run_every, phase: float, relative: bool = False, nowfun=None, app=None):
        super().__init__(run_every, relative=relative, nowfun=nowfun, app=app)
        self.phase = phase

    def next_slot(self, after: float) -> float:
        every = self.seconds
        return self.phase + math.ceil((after + every / 2 - self.phase) / every) * every

    def is_due(self, last_run_at) -> schedules.schedstate:
        now = self.now().timestamp()
        due_at = self.next_slot(self.maybe_make_aware(last_run_at).timestamp())
        if due_at <= now:
            return schedules.schedstate(True, self.next_slot(now) - now)
        return schedules.schedstate(False, due_at - now)

    def __reduce__(self):
        return self.__class__, (self.run_every, self.phase, self.relative, self.nowfun)

    def __repr__(self) -> str:
        return f"<phased: every {self.human_seconds} at +{self.phase:.2f} s>"


class PhasedEntry(ModelEntry):
    """A PeriodicTask row whose interval schedule runs phased: the phase keyed by its first
    argument (a cluster's id, for the rounds) or else by its name."""

    def __init__(self, model, app=None):
        super().__init__(model, app=app)
        schedule = getattr(self, "schedule", None)  # unset for a row whose schedule was removed
        if isinstance(schedule, schedules.schedule):  # intervals; crontab, solar and clocked stay as they are
            first = self.args[0] if getattr(self, "args", None) else None
            key = first if isinstance(first, int) else zlib.crc32(self.name.encode())
            self.schedule = phased(schedule.run_every, phase_of(key, schedule.seconds), app=self.app)


class PhasedScheduler(DatabaseScheduler):
    Entry = PhasedEntry
