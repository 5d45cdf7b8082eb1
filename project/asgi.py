"""ASGI entry point: HTTP through Django (static files through WhiteNoise, a middleware:
dashboard/staticfiles.py), no more requests at once than database connections
(project/admission.py), WebSockets through Channels with session auth and an Origin check."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_asgi_app = get_asgi_application()  # before anything that imports models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from dashboard.live.routing import websocket_urlpatterns  # noqa: E402

from .admission import Admission  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": Admission(django_asgi_app, settings.REQUESTS_AT_ONCE, settings.REQUEST_QUEUE_TIMEOUT),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
