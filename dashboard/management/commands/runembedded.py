"""`make run`: the whole product in one process, with no service to install.

Daphne serves HTTP and WebSockets in the main thread; a Celery worker and beat run as
threads over kombu's in-process `memory://` broker, and pushes go through the
thread-safe in-memory channel layer. Tasks, `.delay()` calls and the beat schedule are
the production ones; only the transports differ (reference/stack-notes.md, step 4c).
"""

import json
import threading

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Migrate, create the demo cluster and admin, then serve the dashboard with worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--round-interval",
            type=int,
            default=None,
            help="seconds between rounds, for a demo cluster created by this run",
        )
        parser.add_argument(
            "--source-config",
            type=json.loads,
            default={},
            help="JSON options of the simulator, for a demo cluster created by this run",
        )

    def handle(self, *args, host: str, port: int, round_interval: int | None, source_config: dict, **options):
        if settings.REDIS_URL:
            # The memory broker and channel layer do not cross processes: with Redis, run
            # `make web`, `make worker` and `make beat` instead.
            raise CommandError("REDIS_URL is set: runembedded is the single-process mode; use make web/worker/beat")
        call_command("migrate", interactive=False, verbosity=0)
        # Before the ASGI application loads: WhiteNoise indexes STATIC_ROOT when it starts.
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("demo", round_interval=round_interval, source_config=source_config, stdout=self.stdout)

        import daphne.server  # noqa: F401  (installs Twisted's asyncio reactor before anything else can)
        from celery.beat import EmbeddedService
        from channels.routing import get_default_application

        from dashboard.tasks import reconcile
        from project.celery import app

        app.finalize()
        app.set_current()
        app.set_default()
        # WorkController, not app.Worker: the latter installs signal handlers, which only
        # the main thread may do. One thread keeps SQLite writes from piling up.
        worker = app.WorkController(
            pool="threads", concurrency=1, without_heartbeat=True, without_mingle=True, without_gossip=True
        )
        threading.Thread(target=worker.start, name="celery-worker", daemon=True).start()
        beat = EmbeddedService(app, thread=True, scheduler_cls=settings.CELERY_BEAT_SCHEDULER)
        beat.start()
        reconcile(restarted=True)

        self.stdout.write(f"dashboard: http://{host}:{port}/  (Ctrl-C to stop)")
        self.stdout.flush()
        try:
            daphne.server.Server(
                application=get_default_application(),
                endpoints=[f"tcp:port={port}:interface={host}"],
                signal_handlers=True,
            ).run()
        finally:
            beat.stop()
            worker.stop(in_sighandler=False)
