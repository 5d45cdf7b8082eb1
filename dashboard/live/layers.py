"""The channel layers: an in-memory one that Celery threads may send to (embedded mode), and
channels-redis's pub/sub layer made to hold under Redis outages (distributed mode).

Channels' `InMemoryChannelLayer` keeps asyncio queues that belong to the web server's
event loop. A Celery worker thread sends through `async_to_sync`, i.e. from another
loop in another thread, and the stock layer then wakes the consumer with a call that is
not thread-safe: messages arrive tens of milliseconds late, and it is a data race
(reference/stack-notes.md). ThreadSafeInMemoryChannelLayer runs every queue operation on the
loop that receives (the server's), whichever thread asks.
"""

import asyncio
import logging
import uuid

import redis
from asgiref.sync import async_to_sync
from channels.layers import BaseChannelLayer, InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer, RedisSingleShardConnection
from channels_redis.utils import _consistent_hash, _wrap_close, create_pool, decode_hosts
from redis import asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

log = logging.getLogger(__name__)


class ThreadSafeInMemoryChannelLayer(InMemoryChannelLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _on_owner_loop(self, coroutine):
        current = asyncio.get_running_loop()
        owner = self._loop
        if owner is None or owner is current or owner.is_closed() or not owner.is_running():
            return await coroutine
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, owner))

    async def receive(self, channel):
        # Consumers receive on the server's loop; that loop owns the queues from now on.
        self._loop = asyncio.get_running_loop()
        return await super().receive(channel)

    async def send(self, channel, message):
        return await self._on_owner_loop(super().send(channel, message))

    async def group_send(self, group, message):
        return await self._on_owner_loop(super().group_send(group, message))

    async def group_add(self, group, channel):
        return await self._on_owner_loop(super().group_add(group, channel))

    async def group_discard(self, group, channel):
        return await self._on_owner_loop(super().group_discard(group, channel))


class RedisBroadcastChannelLayer(RedisPubSubChannelLayer):
    """The distributed mode's layer: one PUBLISH per event, fanned out inside each web process.

    channels-redis's list-based layer copies every group message into one Redis list per page
    (200 pages: 200 serialisations, 200 pushes, 200 blocking reads woken) and made a round
    reach the 200th page 154 ms late (bench/README.md). Its pub/sub layer publishes once per
    event; each web process subscribes once per cluster it shows and hands the message to its
    pages in memory. Two changes make it hold under outages like the list layer did:

    * a consumer's own channel is local to its process (nothing here sends to one by name:
      pages are reached through their cluster's group), so opening a socket asks nothing of
      Redis but the group join, which consumers.py refuses cleanly while Redis is away,
      instead of a 500 from a failed subscription in the handshake;
    * messages published while the subscription was broken are lost, so every page of the
      process is told when it breaks and when it comes back (`layer.lost`): its socket
      closes, and the page says live updates paused, reconnects and refetches the state;
      meanwhile a join is refused, as it was with the list layer.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._publishers: dict[str, redis.Redis] = {}  # address -> client, for group_send_blocking

    def _get_layer(self):
        loop = asyncio.get_running_loop()
        if loop not in self._layers:
            self._layers[loop] = BroadcastLoopLayer(*self._args, **self._kwargs, channel_layer=self)
            _wrap_close(self, loop)
        return self._layers[loop]

    def group_send_blocking(self, group: str, message: dict) -> None:
        """group_send for synchronous code (the worker's pushes): the same PUBLISH on one Redis
        connection kept by the process. Through async_to_sync every push made a thread and an
        event loop, hence a layer and a Redis connection of its own (they are kept per loop),
        and closed them again: 2-24 ms before the event left the worker (bench/README.md)."""
        hosts = decode_hosts(self._kwargs.get("hosts"))
        channel = f"{self._kwargs.get('prefix', 'asgi')}__group__{group}"  # RedisPubSubLoopLayer's name
        host = hosts[_consistent_hash(channel, len(hosts))]
        if host["address"] not in self._publishers:
            options = {key: value for key, value in host.items() if key != "address"}
            self._publishers[host["address"]] = redis.Redis.from_url(host["address"], **options)
        self._publishers[host["address"]].publish(channel, self.serialize(message))


LOST = {"type": "layer.lost"}


class BroadcastLoopLayer(RedisPubSubLoopLayer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._shards = [WatchedShard(host, self) for host in decode_hosts(kwargs.get("hosts"))]

    async def new_channel(self, prefix: str = "specific.") -> str:
        channel = f"{self.prefix}{prefix}{uuid.uuid4().hex}"
        self.channels[channel] = asyncio.Queue()
        return channel

    async def group_add(self, group: str, channel: str) -> None:
        """Refused while the subscription is broken: joining a group this process already
        subscribes to asks nothing of Redis, and would open a socket that cannot receive."""
        if any(shard.broken for shard in self._shards):
            raise RedisConnectionError("the Redis subscription is broken: live updates are paused")
        await super().group_add(group, channel)

    def tell_lost(self) -> None:
        message = self.channel_layer.serialize(LOST)
        for queue in self.channels.values():
            queue.put_nowait(message)


class WatchedShard(RedisSingleShardConnection):
    _redis: aioredis.Redis | None  # channels-redis sets it; typed here, as the library ships no types

    def _ensure_redis(self) -> None:
        if self._redis is None:
            self._redis = aioredis.Redis(connection_pool=create_pool(self.host))
            self._pubsub = WatchedPubSub(self._redis.connection_pool, lost=self.channel_layer.tell_lost)

    @property
    def broken(self) -> bool:
        return isinstance(self._pubsub, WatchedPubSub) and self._pubsub.broken


class WatchedPubSub(PubSub):
    """A subscription that reports its breaks: the first failed read of an outage, and every
    reconnection (redis-py reconnects and subscribes again by itself, possibly before a read
    fails; it calls on_connect only on a reconnection, never for the first connection)."""

    def __init__(self, *args, lost, **kwargs):
        super().__init__(*args, **kwargs)
        self.lost, self.broken = lost, False

    async def on_connect(self, connection) -> None:
        log.warning("channel layer: the Redis subscription reconnected; the pages of this process refetch")
        self.broken = False
        self.lost()
        await super().on_connect(connection)

    async def get_message(self, *args, **kwargs):
        try:
            return await super().get_message(*args, **kwargs)
        except (OSError, RedisError):
            if not self.broken:
                log.warning("channel layer: the Redis subscription broke; the pages of this process are closed")
                self.broken = True
                self.lost()
            raise


def group_send_blocking(layer: BaseChannelLayer, group: str, message: dict) -> None:
    """Send to a group from synchronous code, whichever the layer: the Redis layer publishes
    on a connection it keeps; the in-memory one runs its group_send on the server's loop."""
    if isinstance(layer, RedisBroadcastChannelLayer):
        layer.group_send_blocking(group, message)
    else:
        async_to_sync(layer.group_send)(group, message)
