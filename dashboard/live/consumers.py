"""The live page's WebSocket: a pipe from the cluster's group to the browser, for as long as
the session that opened it lasts."""

import asyncio
from importlib import import_module

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.contrib.auth import SESSION_KEY

from . import sender as live

# How often an open socket asks whether its session still exists: a logout in another tab
# or an expired session closes it (4401) within this many seconds.
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
        self.group = live.group_name(self.scope["url_route"]["kwargs"]["cluster_id"])
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
        except Exception:  # the layer (Redis) is down or restarting: a failed join, not a server error
            # Refuse the handshake (403) rather than accept and close: an accepted socket would
            # flash "open" on the page. The page says live updates are paused and reconnects.
            await self.close()
            return
        await self.accept()
        self.watch = asyncio.create_task(self.watch_session())

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "watch"):
            self.watch.cancel()
        if hasattr(self, "group"):
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except Exception:  # Redis away: the membership goes with this process's subscription
                pass

    async def watch_session(self) -> None:
        """The scope's session is the one read at the handshake; the store says if it still holds."""
        key, user_id = self.scope["session"].session_key, str(self.scope["user"].pk)
        while True:
            await asyncio.sleep(SESSION_CHECK_SECONDS)
            if await database_sync_to_async(session_user)(key) != user_id:
                await self.close(code=4401)
                return

    async def cluster_event(self, event: dict) -> None:
        await self.send(text_data=event["text"])  # JSON, encoded once by live.push

    async def layer_lost(self, event: dict) -> None:
        """The layer's Redis subscription broke (dashboard/live/layers.py): events may have been
        lost, so close; the page says live updates paused, reconnects and refetches. 4011, as
        1011 ("internal error") is the server's own: the application may not send it."""
        await self.close(code=4011)


def session_user(key: str | None) -> str | None:
    """The user id a session key is logged in as now; None once logged out, flushed or expired."""
    return import_module(settings.SESSION_ENGINE).SessionStore(key).get(SESSION_KEY) if key else None
