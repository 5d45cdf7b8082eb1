from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"

    def ready(self) -> None:
        from . import logins, notify, signals  # noqa: F401  (connects the receivers)
