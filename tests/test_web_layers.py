"""The distributed mode's channel layer on a real Redis server: a page hears its own
installation's rounds and never another's that shares the Redis server under another database
number (pub/sub channels are server-wide; found running the product beside the test suite)."""

import asyncio

from redis.connection import parse_url

from dashboard.live.layers import RedisBroadcastChannelLayer
from project.settings import channel_prefix


def layer(url: str) -> RedisBroadcastChannelLayer:
    return RedisBroadcastChannelLayer(hosts=[{"address": url}], prefix=channel_prefix(url))


def other_database(url: str) -> str:
    db = parse_url(url).get("db", 0)
    return url.rsplit("/", 1)[0] + f"/{(db + 1) % 16}"


async def heard(listener: RedisBroadcastChannelLayer, sender: RedisBroadcastChannelLayer) -> list[str]:
    """What a page of `listener` receives of one round that `sender` pushes to cluster 1, up to
    the round its own installation pushes next: Redis delivers a channel's messages in the order
    it took them, so once that one is heard, `sender`'s would have been (no waiting on a clock)."""
    page = await listener.new_channel()
    await listener.group_add("cluster-1", page)
    try:
        await subscribed(listener, page)
        await sender.group_send("cluster-1", {"type": "cluster.event", "text": "round 7"})
        await listener.group_send("cluster-1", {"type": "cluster.event", "text": "round 8"})
        texts: list[str] = []
        while "round 8" not in texts:
            texts.append((await asyncio.wait_for(listener.receive(page), timeout=5))["text"])
        return [text for text in texts if text not in ("subscribed", "round 8")]
    finally:
        await listener.group_discard("cluster-1", page)
        await listener.flush()
        await sender.flush()


async def subscribed(layer: RedisBroadcastChannelLayer, page: str) -> None:
    """Until the page hears its own installation: its subscription is made (it subscribes in
    the background, and a message published before is lost)."""
    for _ in range(50):
        await layer.group_send("cluster-1", {"type": "cluster.event", "text": "subscribed"})
        try:
            await asyncio.wait_for(layer.receive(page), timeout=0.1)
            return
        except TimeoutError:
            continue
    raise TimeoutError("the page never heard its own installation on cluster-1")


def test_a_page_hears_its_installations_rounds_and_not_anothers_on_the_same_redis(redis_url):
    ours, theirs = redis_url, other_database(redis_url)
    assert channel_prefix(ours) != channel_prefix(theirs)
    assert asyncio.run(heard(layer(ours), layer(ours))) == ["round 7"]
    assert asyncio.run(heard(layer(ours), layer(theirs))) == []
