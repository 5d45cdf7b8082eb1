"""The live page's WebSocket: who may connect, and that pushes arrive."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from dashboard.live import sender as live
from project.asgi import application

ORIGIN = (b"origin", b"http://127.0.0.1")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()


async def test_anonymous_is_closed_with_4401(cluster):
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=[ORIGIN])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}


async def test_foreign_origin_is_refused(admin, cluster):
    cookie = await sync_to_async(session_cookie)(admin)
    communicator = WebsocketCommunicator(
        application, f"/ws/clusters/{cluster.pk}/", headers=[(b"origin", b"http://evil.example"), cookie]
    )
    connected, _ = await communicator.connect(timeout=10)
    assert not connected


async def test_logged_in_page_receives_its_clusters_pushes(admin, cluster):
    cookie = await sync_to_async(session_cookie)(admin)
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=[ORIGIN, cookie])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    await sync_to_async(live.push)(cluster.pk + 1, {"type": "round", "imbalance": 0.9})  # another cluster
    await sync_to_async(live.push)(cluster.pk, {"type": "round", "imbalance": 0.4})
    message = await communicator.receive_json_from(timeout=5)
    assert (message["type"], message["imbalance"]) == ("round", 0.4)
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_every_page_gets_every_push_in_order(admin, cluster):
    cookie = await sync_to_async(session_cookie)(admin)
    url = f"/ws/clusters/{cluster.pk}/"
    pages = [WebsocketCommunicator(application, url, headers=[ORIGIN, cookie]) for _ in range(5)]
    for page in pages:
        assert (await page.connect(timeout=10))[0]
    for imbalance in (0.1, 0.2, 0.3, 0.4):
        await sync_to_async(live.push)(cluster.pk, {"type": "round", "imbalance": imbalance})
    for page in pages:
        assert [(await page.receive_json_from(timeout=5))["imbalance"] for _ in range(4)] == [0.1, 0.2, 0.3, 0.4]
        assert await page.receive_nothing(timeout=0.1)
        await page.disconnect()


async def test_socket_closes_with_4401_when_its_session_ends(admin, cluster, monkeypatch):
    from django.contrib.sessions.models import Session

    from dashboard.live import consumers

    monkeypatch.setattr(consumers, "SESSION_CHECK_SECONDS", 0.1)
    cookie = await sync_to_async(session_cookie)(admin)
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=[ORIGIN, cookie])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    assert await communicator.receive_nothing(timeout=0.3)  # still signed in: stays open
    await sync_to_async(Session.objects.all().delete)()  # what logging out in another tab does
    assert await communicator.receive_output(timeout=3) == {"type": "websocket.close", "code": 4401}


async def test_logging_out_closes_only_that_sessions_pages(admin, cluster, monkeypatch):
    from django.contrib.sessions.models import Session

    from dashboard.live import consumers

    monkeypatch.setattr(consumers, "SESSION_CHECK_SECONDS", 0.1)
    cookies = [await sync_to_async(session_cookie)(admin) for _ in range(2)]  # two browsers
    url = f"/ws/clusters/{cluster.pk}/"
    pages = [WebsocketCommunicator(application, url, headers=[ORIGIN, cookie]) for cookie in cookies * 2]
    for page in pages:
        assert (await page.connect(timeout=10))[0]
    first_session = cookies[0][1].decode().split("=")[1]
    await sync_to_async(Session.objects.filter(session_key=first_session).delete)()  # the first browser logs out
    for page in pages[0::2]:
        assert await page.receive_output(timeout=3) == {"type": "websocket.close", "code": 4401}
    for page in pages[1::2]:
        assert await page.receive_nothing(timeout=0.5)  # the other browser's pages stay open and get pushes
    await sync_to_async(live.push)(cluster.pk, {"type": "round", "imbalance": 0.4})
    for page in pages[1::2]:
        assert (await page.receive_json_from(timeout=5))["imbalance"] == 0.4
        await page.disconnect()


async def test_a_join_that_fails_while_redis_restarts_refuses_the_handshake(admin, cluster, monkeypatch):
    from channels.layers import get_channel_layer

    async def down(*args):
        raise ConnectionError("Error connecting to Redis")

    monkeypatch.setattr(get_channel_layer(), "group_add", down)
    cookie = await sync_to_async(session_cookie)(admin)
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=[ORIGIN, cookie])
    connected, _ = await communicator.connect(timeout=10)
    assert not connected  # refused, not a 500 and not a socket that opens and closes: the page reconnects


def redis_layers(url: str) -> dict:
    """The production layer (project/settings.py) on this Redis."""
    config = {"hosts": [{"address": url, "socket_timeout": 5}], "prefix": "crs-test"}
    return {"default": {"BACKEND": "dashboard.live.layers.RedisBroadcastChannelLayer", "CONFIG": config}}


async def test_pushes_reach_every_page_in_order_through_redis(admin, cluster, redis_url, settings):
    settings.CHANNEL_LAYERS = redis_layers(redis_url)
    cookie = await sync_to_async(session_cookie)(admin)
    url = f"/ws/clusters/{cluster.pk}/"
    pages = [WebsocketCommunicator(application, url, headers=[ORIGIN, cookie]) for _ in range(3)]
    for page in pages:
        assert (await page.connect(timeout=10))[0]
    for imbalance in (0.1, 0.2, 0.3):  # from a worker thread, as the rounds' tasks push
        await sync_to_async(live.push, thread_sensitive=False)(cluster.pk, {"type": "round", "imbalance": imbalance})
    for page in pages:
        assert [(await page.receive_json_from(timeout=5))["imbalance"] for _ in range(3)] == [0.1, 0.2, 0.3]
        await page.disconnect()


async def test_a_push_while_redis_is_away_is_logged_not_raised(cluster, settings, caplog):
    settings.CHANNEL_LAYERS = redis_layers("redis://127.0.0.1:1/0")  # nothing listens there
    await sync_to_async(live.push)(cluster.pk, {"type": "round", "imbalance": 0.4})
    assert "live update not sent (pages catch up on reconnect)" in caplog.text
