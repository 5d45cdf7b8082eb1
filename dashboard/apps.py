from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"

    def ready(self) -> None:
        from . import logins, notify, signals, tasks  # noqa: F401  (connects the receivers, events.py's too)
