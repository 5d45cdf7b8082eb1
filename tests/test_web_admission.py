"""The door of the web process: requests beyond its database connections wait their turn,
and one that waits past the queue timeout is told to retry (503), never a 500."""

import asyncio

from project.admission import BUSY, Admission


async def call(app, scope_type="http"):
    sent = []

    async def send(message):
        sent.append(message)

    await app({"type": scope_type}, None, send)
    return sent


def test_requests_beyond_the_limit_wait_their_turn_and_a_long_wait_is_a_503_with_retry_after():
    inside, most = [0], [0]

    async def slow(scope, receive, send):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        await asyncio.sleep(0.2)
        inside[0] -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def burst(limit, timeout, count):
        door = Admission(slow, limit, timeout)
        return await asyncio.gather(*(call(door) for _ in range(count)))

    answers = asyncio.run(burst(2, 5.0, 6))  # 0.6 s of work for 2 at a time: every one waits its turn
    assert [a[0]["status"] for a in answers] == [200] * 6 and most[0] == 2

    answers = asyncio.run(burst(1, 0.3, 3))  # the third would wait 0.4 s
    statuses = sorted(a[0]["status"] for a in answers)
    assert statuses == [200, 200, 503]
    busy = next(a for a in answers if a[0]["status"] == 503)
    assert (b"retry-after", b"5") in busy[0]["headers"] and busy[1]["body"] == BUSY


def test_websockets_pass_the_door():
    async def socket(scope, receive, send):  # a socket is held for minutes; here 0.1 s
        await asyncio.sleep(0.1)
        await send({"type": "websocket.accept"})

    async def both():
        door = Admission(socket, 1, 0.01)
        return await asyncio.gather(*(call(door, "websocket") for _ in range(3)))

    assert [a[0]["type"] for a in asyncio.run(both())] == ["websocket.accept"] * 3
