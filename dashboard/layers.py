"""An in-memory channel layer that Celery threads may send to (embedded mode only).

Channels' `InMemoryChannelLayer` keeps asyncio queues that belong to the web server's
event loop. A Celery worker thread sends through `async_to_sync`, i.e. from another
loop in another thread, and the stock layer then wakes the consumer with a call that is
not thread-safe: messages arrive tens of milliseconds late, and it is a data race
(reference/stack-notes.md). This subclass runs every queue operation on the loop that
receives (the server's), whichever thread asks.
"""

import asyncio

from channels.layers import InMemoryChannelLayer


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
