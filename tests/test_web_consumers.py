"""The live page's WebSocket: who may connect, and that pushes arrive."""

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from dashboard.asgi import application
from dashboard.live import sender as live

ORIGIN = (b"origin", b"http://127.0.0.1")
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()


async def test_anonymous_is_closed_with_4401(cluster):
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=[ORIGIN])
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_output() == {"type": "websocket.close", "code": 4401}


async def test_foreign_origin_is_refused(admin, cluster):
    cookie = await sync_to_async(session_cookie)(admin)
    communicator = WebsocketCommunicator(
        application, f"/ws/clusters/{cluster.pk}/", headers=[(b"origin", b"http://evil.example"), cookie]
    )
    connected, _ = await communicator.connect()
    assert not connected


async def test_logged_in_page_receives_its_clusters_pushes(admin, cluster):
    cookie = await sync_to_async(session_cookie)(admin)
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=[ORIGIN, cookie])
    connected, _ = await communicator.connect()
    assert connected
    await sync_to_async(live.push)(cluster.pk + 1, {"type": "round", "imbalance": 0.9})  # another cluster
    await sync_to_async(live.push)(cluster.pk, {"type": "round", "imbalance": 0.4})
    message = await communicator.receive_json_from(timeout=5)
    assert (message["type"], message["imbalance"]) == ("round", 0.4)
    assert await communicator.receive_nothing(timeout=0.2)
    await communicator.disconnect()


async def test_socket_closes_with_4401_when_its_session_ends(admin, cluster, monkeypatch):
    from django.contrib.sessions.models import Session

    from dashboard.live import consumers

    monkeypatch.setattr(consumers, "SESSION_CHECK_SECONDS", 0.1)
    cookie = await sync_to_async(session_cookie)(admin)
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=[ORIGIN, cookie])
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_nothing(timeout=0.3)  # still signed in: stays open
    await sync_to_async(Session.objects.all().delete)()  # what logging out in another tab does
    assert await communicator.receive_output(timeout=3) == {"type": "websocket.close", "code": 4401}


async def test_a_join_that_fails_while_redis_restarts_refuses_the_handshake(admin, cluster, monkeypatch):
    from channels.layers import get_channel_layer

    async def down(*args):
        raise ConnectionError("Error connecting to Redis")

    monkeypatch.setattr(get_channel_layer(), "group_add", down)
    cookie = await sync_to_async(session_cookie)(admin)
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=[ORIGIN, cookie])
    connected, _ = await communicator.connect()
    assert not connected  # refused, not a 500 and not a socket that opens and closes: the page reconnects
