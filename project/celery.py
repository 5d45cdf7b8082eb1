"""The Celery app: configured from Django settings (CELERY_*), tasks found in dashboard.tasks."""

import gc
import logging
import os
import time

from celery import Celery, bootsteps
from celery.fixups import django as django_fixup
from celery.signals import beat_init, worker_init, worker_process_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


class PoolKeepingFixup(django_fixup.DjangoWorkerFixup):
    """Celery's Django fix-up, except that a task's connections go back to this process's pool
    between tasks instead of the pool being closed: with prefork and a pool configured, the
    fix-up closes the pool before and after every task, so every task connected anew (4.55 new
    connections a round; about 10 ms of the worker's CPU and 15-27 ms of PostgreSQL's). A
    connection broken by a database outage is still dropped (close_old_connections finds it
    unusable) and the pool replaces it. A forked child still closes the pool it inherited
    (on_worker_process_init calls _close_database, not this)."""

    def close_database(self, **kwargs) -> None:
        from django.db import close_old_connections

        close_old_connections()


class PoolKeepingDjangoFixup(django_fixup.DjangoFixup):
    """Celery's Django fix-up whose worker side is PoolKeepingFixup (made when a worker starts,
    as Celery makes its own: it reads the app's configuration)."""

    @property
    def worker_fixup(self) -> django_fixup.DjangoWorkerFixup:
        if self._worker_fixup is None:  # type: ignore[has-type]  # set in DjangoFixup.__init__
            self._worker_fixup = PoolKeepingFixup(self.app)
        return self._worker_fixup

    @worker_fixup.setter
    def worker_fixup(self, value: django_fixup.DjangoWorkerFixup) -> None:
        self._worker_fixup = value


def fixup(app: Celery) -> PoolKeepingDjangoFixup:
    """Installed in place of Celery's own (celery.fixups.django:fixup): this app is always Django's."""
    return PoolKeepingDjangoFixup(app).install()


app = Celery("dashboard", fixups=["project.celery:fixup"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

log = logging.getLogger(__name__)
BEAT_LEASE = 0x637273  # the PostgreSQL advisory lock key ("crs") of the one running beat
_lease = None  # the connection that holds it, for the life of the beat process


@worker_ready.connect
def reconcile_on_start(sender, **kwargs) -> None:
    """A worker that starts (or restarts after an outage) follows again what nobody follows.
    Queued, not run here: the main process keeps no database connection of its own. Twice: a
    worker killed between a poll and queuing the next left a migration that reads as followed
    until UNFOLLOWED after that poll, and with no round running (beat down) nothing else looks."""
    from dashboard.models.migration import UNFOLLOWED

    sender.app.send_task("dashboard.tasks.reconcile")
    sender.app.send_task("dashboard.tasks.reconcile", countdown=UNFOLLOWED.total_seconds() + 1)


@worker_init.connect
@worker_process_init.connect
def freeze_start_up(**kwargs) -> None:
    """What the worker loaded at start (Django, the models, the engine) never becomes garbage:
    frozen, a full collection no longer walks it. One took ~85 ms of a round every ~25 rounds
    (210 ms on a loaded machine); frozen, the longest is under 10 ms and all of them cost
    0.5 ms a round (bench/notes/48). The thresholds stay Python's, so cyclic garbage a task
    leaves is still collected as often. Prefork children share the frozen pages too."""
    gc.collect()
    gc.freeze()


class Heartbeat(bootsteps.StartStopStep):
    """The worker's heartbeat for /healthz and /metrics (dashboard/health.py), from its event
    loop's timer: a hung or stopped worker stops beating. A consumer step, started again each
    time the consumer reconnects to the broker: a reconnect clears the event loop's timer
    (celery.worker.loops.asynloop), and a worker step's heartbeat never came back after a Redis
    restart while the worker went on running tasks.
    """

    requires = {"celery.worker.consumer.connection:Connection"}

    def start(self, consumer) -> None:
        from dashboard.health import heartbeat, worker_heartbeats

        beats = worker_heartbeats(consumer.app.amqp.queues.consume_from)  # -Q's queues, or all

        def beat() -> None:
            for component in beats:
                heartbeat(component)

        self.tref = consumer.timer.call_repeatedly(2.0, beat)

    def stop(self, consumer) -> None:
        consumer.timer.cancel(self.tref)


app.steps["consumer"].add(Heartbeat)


@beat_init.connect
def heartbeat_on_tick(sender, **kwargs) -> None:
    """Beat's heartbeat (dashboard/health.py) after each pass of its scheduler: a beat that
    waits for the lease, or whose scheduler stopped, does not beat."""
    from dashboard.health import heartbeat

    scheduler = sender.scheduler
    tick = scheduler.tick

    def ticked(*args, **kwargs):
        interval = tick(*args, **kwargs)
        heartbeat("beat")
        return interval

    scheduler.tick = ticked


@beat_init.connect
def one_beat_at_a_time(sender, **kwargs) -> None:
    """Two beats would queue every collect twice and halve the hold duration. The first beat
    takes a lease (an advisory lock, released by PostgreSQL when its connection ends); another
    says so and waits, and takes over if the first stops. The embedded mode runs one beat."""
    global _lease
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] != "django.db.backends.postgresql":
        return
    import psycopg

    _lease = psycopg.connect(
        dbname=db["NAME"],
        user=db["USER"],
        password=db["PASSWORD"],
        host=db["HOST"],
        port=db["PORT"] or None,
        autocommit=True,
        application_name="crs-beat-lease",
    )
    warned = False
    while not _lease.execute("SELECT pg_try_advisory_lock(%s)", (BEAT_LEASE,)).fetchone()[0]:  # type: ignore[index]  # one row, always
        if not warned:
            log.warning("another beat is running (it holds the beat lease): this one waits and takes over if it stops")
            warned = True
        time.sleep(2)
    if warned:
        log.warning("the other beat stopped: this one schedules the rounds now")
