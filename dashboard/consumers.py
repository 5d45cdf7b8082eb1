"""The live page's WebSocket: a pipe from the cluster's group to the browser."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from . import live


class ClusterConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope["user"]
        if not user.is_authenticated or not await database_sync_to_async(user.has_perm)("dashboard.view_cluster"):
            # Accept first: a refused handshake reaches the browser without a code, and the
            # page must tell "log in again" (4401) or "no role" (4403) from a network drop (reconnect).
            await self.accept()
            await self.close(code=4401 if not user.is_authenticated else 4403)
            return
        group = live.group_name(self.scope["url_route"]["kwargs"]["cluster_id"])
        try:
            await self.channel_layer.group_add(group, self.channel_name)
        except Exception:  # the layer (Redis) is down or restarting: a failed join, not a server error
            # Refuse the handshake (403) rather than accept and close: an accepted socket would
            # flash "open" on the page. The page says live updates are paused and reconnects.
            await self.close()
            return
        self.group = group
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def cluster_event(self, event: dict) -> None:
        await self.send_json(event["payload"])
