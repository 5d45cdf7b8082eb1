"""A burst of requests under the production settings (real daphne on PostgreSQL and Redis):
every request is answered, and the web process holds no more database connections than its pool."""

import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import psycopg
from conftest import ARTIFACTS, distributed_stack, own_database, start
from wsclient import login

PASSWORD = "load-password"
POOL_SIZE = 10  # the default CRS_DB_POOL_SIZE
BURST = 200


def web_connections(database_url: str) -> int:
    """The web server's connections to its database, as the PostgreSQL server counts them."""
    parts = urllib.parse.urlsplit(database_url)
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'crs-daphne'",
            (parts.path.lstrip("/"),),
        ).fetchone()[0]


def status_of(url: str, cookie: str) -> int:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_burst_of_200_viewers_gets_no_5xx_and_the_pool_bounds_connections(redis_url):
    with own_database("load") as database_url, distributed_stack(database_url, redis_url, PASSWORD, "load") as base:
        make_viewer = (
            "from django.contrib.auth.models import Group, User; "
            "u = User.objects.create_user('viewer', password='viewer-password'); "
            "u.groups.add(Group.objects.get(name='viewer'))"
        )
        env = {"DATABASE_URL": database_url, "REDIS_URL": redis_url, "CRS_SECRET_KEY": "load-test"}
        assert start(["manage.py", "shell", "-c", make_viewer], env, ARTIFACTS / "load-setup.log").wait(120) == 0
        cookie = login(base, "viewer", "viewer-password")
        url = f"{base}/api/clusters/1/"

        peak, done = [0], threading.Event()

        def watch():
            while not done.is_set():
                peak[0] = max(peak[0], web_connections(database_url))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(BURST) as pool:
                statuses = list(pool.map(lambda _: status_of(url, cookie), range(BURST)))
        finally:
            done.set()
            watcher.join()
        assert sorted(set(statuses)) == [200], {s: statuses.count(s) for s in set(statuses)}
        assert 1 <= peak[0] <= POOL_SIZE
        assert web_connections(database_url) <= POOL_SIZE
        (ARTIFACTS / "load-figures.txt").write_text(
            f"{BURST} concurrent GET /api/clusters/1/: {statuses.count(200)} x 200, "
            f"{sum(s >= 500 for s in statuses)} x 5xx; web connections peak {peak[0]} (pool {POOL_SIZE})\n"
        )
