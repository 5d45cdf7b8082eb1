"""The Celery app: configured from Django settings (CELERY_*), tasks found in dashboard.tasks."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("dashboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def reconcile_on_start(sender, **kwargs) -> None:
    """A worker that starts (or restarts after an outage) follows again what nobody follows.
    Queued, not run here: the main process keeps no database connection of its own."""
    sender.app.send_task("dashboard.tasks.reconcile")
