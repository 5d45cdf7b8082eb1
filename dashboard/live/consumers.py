"""The live page's WebSocket: a pipe from the cluster's group to the browser, for as long as
the session that opened it lasts."""

import asyncio
from importlib import import_module
from weakref import WeakKeyDictionary

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.utils import timezone

from . import sender as live

# How often a web process asks whether its open sockets' sessions still exist: a logout in
# another tab or an expired session closes the socket (4401) within this many seconds.
SESSION_CHECK_SECONDS = 10


class ClusterConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope["user"]
        if not user.is_authenticated or not await database_sync_to_async(user.has_perm)("dashboard.view_cluster"):
            # Accept first: a refused handshake reaches the browser without a code, and the
            # page must tell "log in again" (4401) or "no role" (4403) from a network drop (reconnect).
            await self.accept()
            await self.close(code=4401 if not user.is_authenticated else 4403)
            return
        self.group = self.group_of(self.scope["url_route"]["kwargs"])
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
        except Exception:  # the layer (Redis) is down or restarting: a failed join, not a server error
            # Refuse the handshake (403) rather than accept and close: an accepted socket would
            # flash "open" on the page. The page says live updates are paused and reconnects.
            await self.close()
            return
        await self.accept()
        # The scope's session is the one read at the handshake; the store says if it still holds.
        session_watch().add(self, self.scope["session"].session_key, str(self.scope["user"].pk))

    def group_of(self, kwargs: dict) -> str:
        return live.group_name(kwargs["cluster_id"])

    async def disconnect(self, code: int) -> None:
        session_watch().sockets.pop(self, None)
        if hasattr(self, "group"):
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except Exception:  # Redis away: the membership goes with this process's subscription
                pass

    async def dispatch(self, message: dict) -> None:
        """Channels' dispatch without its thread hop: before every handler it runs
        close_old_connections on the one thread Django code shares, so a push to 200 pages
        waited for 200 hops queued one after another (and behind the session checks) before
        the first frame left. This consumer reaches the database only through
        database_sync_to_async, which closes stale connections around each call itself."""
        await getattr(self, get_handler_name(message))(message)

    async def cluster_event(self, event: dict) -> None:
        await self.send(text_data=event["text"])  # JSON, encoded once by live.push

    async def layer_lost(self, event: dict) -> None:
        """The layer's Redis subscription broke (dashboard/live/layers.py): events may have been
        lost, so close; the page says live updates paused, reconnects and refetches. 4011, as
        1011 ("internal error") is the server's own: the application may not send it."""
        await self.close(code=4011)


class OverviewConsumer(ClusterConsumer):
    """The overview page's socket: one event per batch of rounds, whichever clusters they were."""

    def group_of(self, kwargs: dict) -> str:
        return live.OVERVIEW


class SessionWatch:
    """The open sockets of one web process (one event loop) and the sessions they were opened
    with, checked together: one query every SESSION_CHECK_SECONDS however many pages are open.
    A check per socket was 20 queries a second at 200 pages, each holding the thread Django
    code shares, on which pushes then waited."""

    def __init__(self) -> None:
        self.sockets: dict[ClusterConsumer, tuple[str | None, str]] = {}
        self.task: asyncio.Task | None = None

    def add(self, consumer: ClusterConsumer, key: str | None, user_id: str) -> None:
        self.sockets[consumer] = (key, user_id)
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self.run())

    async def run(self) -> None:
        """Ends when the process has no socket open; `add` starts it again."""
        while self.sockets:
            await asyncio.sleep(SESSION_CHECK_SECONDS)
            watched = dict(self.sockets)
            users = await database_sync_to_async(session_users)({key for key, _ in watched.values()})
            for consumer, (key, user_id) in watched.items():
                if users.get(key) != user_id and self.sockets.pop(consumer, None):
                    await consumer.close(code=4401)


_watches: "WeakKeyDictionary[asyncio.AbstractEventLoop, SessionWatch]" = WeakKeyDictionary()


def session_watch() -> SessionWatch:
    return _watches.setdefault(asyncio.get_running_loop(), SessionWatch())


def session_users(keys: set[str | None]) -> dict[str | None, str | None]:
    """The user id each of these sessions is logged in as now; a session logged out, flushed or
    expired is absent. One query: the session store is the database (Django's default engine)."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    sessions = store.get_model_class().objects.filter(
        session_key__in=[key for key in keys if key], expire_date__gt=timezone.now()
    )
    return {session.session_key: store().decode(session.session_data).get(SESSION_KEY) for session in sessions}
