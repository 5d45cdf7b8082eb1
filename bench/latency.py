"""Round → browser latency with 1, 50 and 200 WebSocket clients, and the memory of each process.

Starts the product as the Makefile does (Redis mode: daphne, a supervised Celery worker and
beat on PostgreSQL and Redis, started by harness/stack.py as the distributed tests start them;
embedded mode: runembedded), connects N logged-in WebSocket clients and times every round
push from `live.push` (the payload's `sent_at`, just after the round commits) to its arrival
at each client. Same host, so one clock.

    .venv/bin/python -m bench.latency [--mode redis|embedded] [--rounds 30]
        [--database-url postgres://postgres@127.0.0.1:5432/crs_bench] [--redis-url redis://127.0.0.1:6379/0]

The Redis database given is flushed; the PostgreSQL database is dropped and recreated. Server
logs go to $TMPDIR/crs-bench/.
"""

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from harness.stack import distributed_stack, free_port, fresh_database, memory_mb, start, stop, wait_for_port
from harness.wsclient import Client, login

PASSWORD = "bench-password"
LOGS = Path(tempfile.gettempdir()) / "crs-bench"


@contextmanager
def redis_stack(args):
    """The distributed mode as the tests start it (harness/stack.py), on a fresh database and Redis."""
    import redis

    fresh_database(args.database_url)
    redis.Redis.from_url(args.redis_url).flushdb()
    with distributed_stack(args.database_url, args.redis_url, PASSWORD, "latency", LOGS) as (url, processes):
        yield url, dict(zip(("web (daphne)", "worker (celery)", "beat (celery)"), processes))


@contextmanager
def embedded_stack(args):
    env = {"DATABASE_URL": f"sqlite:///{LOGS}/bench.sqlite3", "REDIS_URL": "", "CRS_ADMIN_PASSWORD": PASSWORD}
    for path in LOGS.glob("bench.sqlite3*"):
        path.unlink()
    port = free_port()
    process = start(
        ["manage.py", "runembedded", "--port", str(port), "--round-interval", "1"], env, LOGS / "embedded.log"
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}", {"runembedded": process}
    finally:
        stop(process)


async def measure(base_url: str, cookie: str, clients: int, rounds: int) -> list[float]:
    """Latencies in ms of `rounds` round pushes at each of `clients` connections."""
    begun = [float("inf")]  # rounds pushed while later pages were still connecting are not timed

    async def collect(client: Client) -> list[float]:
        """Reads from the moment it connects (answering daphne's pings), times once all are in.

        A message is stamped as it comes off the socket, before it is decoded: a browser
        decodes each page's message in that page, while here one process decodes all 200 in
        turn, which delayed the 200th by the 199 decodes before it."""
        out = []
        while len(out) < rounds:
            text = await client.receive_text()
            arrived = time.time()
            message = json.loads(text)
            if message["type"] == "round" and message["sent_at"] >= begun[0]:
                out.append((arrived - message["sent_at"]) * 1000)
        return out

    connections, readers = [], []
    try:
        for _ in range(clients):
            connections.append(await connect(base_url, cookie))
            readers.append(asyncio.ensure_future(collect(connections[-1])))
        begun[0] = time.time()
        per_client = await asyncio.wait_for(asyncio.gather(*readers), rounds * 5 + 60)
    finally:
        for reader in readers:
            reader.cancel()
        for client in connections:
            client.close()
    return [ms for latencies in per_client for ms in latencies]


async def connect(base_url: str, cookie: str) -> Client:
    """One page's socket, one at a time, tried again: on a busy machine daphne drops a handshake
    it cannot finish within 5 s, and the figure wanted is the push, not the connect."""
    for attempt in range(5):
        try:
            return await Client.connect(base_url, "/ws/clusters/1/", cookie)
        except (ConnectionError, OSError):
            await asyncio.sleep(1 + attempt)
    return await Client.connect(base_url, "/ws/clusters/1/", cookie)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=["redis", "embedded"], default="redis")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 50, 200])
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/crs_bench")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    LOGS.mkdir(exist_ok=True)
    with (redis_stack if args.mode == "redis" else embedded_stack)(args) as (base_url, processes):
        cookie = login(base_url, "admin", PASSWORD)
        print(f"mode {args.mode}, {args.rounds} rounds per client count, one round per second")
        print("| clients | pushes timed | median ms | p95 ms | max ms |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for clients in args.clients:
            ms = sorted(asyncio.run(measure(base_url, cookie, clients, args.rounds)))
            p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
            print(f"| {clients} | {len(ms)} | {statistics.median(ms):.1f} | {p95:.1f} | {ms[-1]:.1f} |")
        print("\n| process | RSS MB | PSS MB |\n| --- | ---: | ---: |")
        for name, process in processes.items():
            rss, pss = memory_mb(process.pid)
            print(f"| {name} | {rss:.0f} | {pss:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
