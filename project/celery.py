"""The Celery app: configured from Django settings (CELERY_*), tasks found in dashboard.tasks."""

import logging
import os
import time

from celery import Celery, bootsteps
from celery.signals import beat_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

log = logging.getLogger(__name__)
BEAT_LEASE = 0x637273  # the PostgreSQL advisory lock key ("crs") of the one running beat
_lease = None  # the connection that holds it, for the life of the beat process


@worker_ready.connect
def reconcile_on_start(sender, **kwargs) -> None:
    """A worker that starts (or restarts after an outage) follows again what nobody follows.
    Queued, not run here: the main process keeps no database connection of its own."""
    sender.app.send_task("dashboard.tasks.reconcile")


class Heartbeat(bootsteps.StartStopStep):
    """The worker's heartbeat for /healthz and /metrics (dashboard/health.py), from its event
    loop's timer: a hung or stopped worker stops beating. A consumer step, started again each
    time the consumer reconnects to the broker: a reconnect clears the event loop's timer
    (celery.worker.loops.asynloop), and a worker step's heartbeat never came back after a Redis
    restart while the worker went on running tasks.
    """

    requires = {"celery.worker.consumer.connection:Connection"}

    def start(self, consumer) -> None:
        from dashboard.health import heartbeat

        self.tref = consumer.timer.call_repeatedly(2.0, heartbeat, ("worker",))

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
