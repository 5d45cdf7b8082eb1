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
    """What a page of `listener` receives of one round that `sender` pushes to cluster 1."""
    page = await listener.new_channel()
    await listener.group_add("cluster-1", page)
    try:
        await asyncio.sleep(0.2)  # the subscription is made
        await sender.group_send("cluster-1", {"type": "cluster.event", "text": "round 7"})
        try:
            return [(await asyncio.wait_for(listener.receive(page), timeout=2))["text"]]
        except TimeoutError:
            return []
    finally:
        await listener.group_discard("cluster-1", page)
        await listener.flush()
        await sender.flush()


def test_a_page_hears_its_installations_rounds_and_not_anothers_on_the_same_redis(redis_url):
    ours, theirs = redis_url, other_database(redis_url)
    assert channel_prefix(ours) != channel_prefix(theirs)
    assert asyncio.run(heard(layer(ours), layer(ours))) == ["round 7"]
    assert asyncio.run(heard(layer(ours), layer(theirs))) == []
