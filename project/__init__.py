"""The Django project: settings, URLs, ASGI and Celery wiring around the `dashboard` app.

The Celery app is imported here so that `@shared_task` binds to it in every process;
without it, `.delay()` from a web process would talk to Celery's default AMQP broker.
"""

from .celery import app as celery_app

__all__ = ["celery_app"]
