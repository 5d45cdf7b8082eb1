"""Fixtures for the web tests. Engine tests use none of them and need no database."""

import os
import subprocess
import time
import urllib.parse
from contextlib import contextmanager

import pytest

from harness.stack import ARTIFACTS, SINGLE_WORKER, RedisServer, drop_database, embedded, fresh_database, start

REQUIRE_SERVICES = os.environ.get("CRS_TEST_REQUIRE_SERVICES", "") in ("1", "true")
# Migrations of the test cluster take the simulator's minimum of one second.
FAST_SIMULATOR = {"migration_mib_s": 1e9, "nodes": 6, "hot_nodes": 2}
E2E_PASSWORD = "e2e-password"  # the admin's, on the browser tests' embedded servers


def pytest_configure(config):
    missing = [name for name in ("CRS_TEST_DATABASE_URL", "CRS_TEST_REDIS_URL") if not os.environ.get(name)]
    if REQUIRE_SERVICES and missing:
        raise pytest.UsageError(f"CRS_TEST_REQUIRE_SERVICES=1 but {', '.join(missing)} unset")


def policy_form(**changes) -> dict:
    """The settings form as a browser posts it (percent, minutes, GiB): every field, the defaults unless changed."""
    data = {
        "mode": "static",
        "automation": "manual",
        "threshold": 30,
        "hold_duration": 3,
        "margin": 10,
        "automatic_margin": 25,
        "method": "bruteforce",
        "imbalance_scale": "normalized",
        "round_interval": 10,
        "cooldown": 30,
        "rejection_memory": 60,
        "recommendation_expiry": 15,
        "minimum_dwell": 10,
        "benefit_horizon": 60,
        "migration_speed": 1024,
        "max_concurrent_migrations": 1,
        "objective": "even",
        "target_imbalance": 20,
        "load_floor": 0,
        "moves_per_round": 5,
        "max_migrations_per_node": 1,
        "cpu_overcommit": 4,
        "memory_reserve": 0,
        "usage_period": 300,
        "containers": "never",
        "forecast": "on",
        "time_zone": "UTC",
    }
    return {**data, **changes}


def service_or_skip(name: str) -> str:
    """The service URL from the environment; skip without it, unless CI requires the services."""
    url = os.environ.get(name, "")
    if not url:
        if REQUIRE_SERVICES:
            pytest.fail(f"{name} is required (CRS_TEST_REQUIRE_SERVICES=1)")
        pytest.skip(f"{name} unset: this test needs the service")
    return url


@pytest.fixture
def redis_url():
    """A Redis database for this test alone: flushed before and after (that database only)."""
    with flushed_redis() as url:
        yield url


@contextmanager
def flushed_redis():
    """This worker's Redis database, flushed before and after (that database only): for a test,
    or for a module whose tests share one stack."""
    import redis

    url = own_redis_database(service_or_skip("CRS_TEST_REDIS_URL"))
    client = redis.Redis.from_url(url)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()


def own_redis_database(url: str) -> str:
    """`url` as this pytest-xdist worker uses it: worker N moves the Redis database number by
    5 N (scripts/testsuite.py's five runs take 0-4), so that no worker flushes another's."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
    if not worker:
        return url
    parts = urllib.parse.urlsplit(url)
    return parts._replace(path=f"/{int(parts.path.lstrip('/') or 0) + 5 * worker}").geturl()


def user_with_role(django_user_model, role: str | None, **fields):
    """A user with password "pw" in the group of `role` (dashboard/roles.py), or in none."""
    from django.contrib.auth.models import Group

    name = role or "outsider"
    user = django_user_model.objects.create_user(name, f"{name}@example.com", "pw", **fields)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def admin(django_user_model):
    """The admin role (settings, clusters, decisions), with staff status for the admin site."""
    return user_with_role(django_user_model, "admin", is_staff=True)


@pytest.fixture
def operator(django_user_model):
    """Sees everything, approves and rejects; changes no settings."""
    return user_with_role(django_user_model, "operator")


@pytest.fixture
def viewer(django_user_model):
    """Sees everything, changes nothing."""
    return user_with_role(django_user_model, "viewer")


@pytest.fixture
def outsider(django_user_model):
    """Has an account but no role: may log in, sees nothing."""
    return user_with_role(django_user_model, None)


@pytest.fixture
def admin_client(client, admin):
    client.force_login(admin)
    return client


@pytest.fixture
def cluster(db):
    from dashboard.models import Cluster

    return Cluster.objects.create(name="test", source_kind="simulator", source_config=FAST_SIMULATOR)


@pytest.fixture
def collected(cluster):
    """The cluster after one collect: it has a snapshot for rounds and approvals to check against."""
    from dashboard.tasks import collect

    collect.apply(args=[cluster.pk])  # queues the round on the in-memory broker: nobody consumes it
    cluster.refresh_from_db()
    return cluster


@pytest.fixture
def suggested(collected):
    """A suggestion that fits the cluster's snapshot: a guest of the first node to the last node."""
    from dashboard.models import Migration

    guest = next(g for g in collected.snapshot["guests"] if g["node"] == "node01")
    return Migration.objects.create(
        cluster=collected,
        leader=guest["sid"],
        guests=[guest["sid"]],
        source="node01",
        target="node06",
        imbalance_before=0.5,
        imbalance_after=0.4,
        relative_gain=0.2,
        margin=0.1,
        method="bruteforce",
    )


def migration_fields(migration) -> dict:
    """What makes a migration the same move (for a second one in another state)."""
    names = ["cluster", "leader", "guests", "source", "target", "imbalance_before", "imbalance_after"]
    return {name: getattr(migration, name) for name in names + ["relative_gain", "margin", "method"]}


@contextmanager
def own_database(suffix: str):
    """A database of its own on the test PostgreSQL server, made fresh and dropped afterwards."""
    url = urllib.parse.urlsplit(service_or_skip("CRS_TEST_DATABASE_URL"))
    url = url._replace(path=f"/{url.path.lstrip('/') or 'crs'}_{suffix}").geturl()
    fresh_database(url)
    try:
        yield url
    finally:
        drop_database(url)


def shared_database_url() -> str:
    """The URL of the database this test runs on, for server subprocesses to share it
    (its rows must be committed: `django_db(transaction=True)`)."""
    from django.db import connection

    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def single_worker(database_url: str, redis_url: str, log: str) -> subprocess.Popen:
    """`make worker` with one process in its pool, unsupervised, in a process group of its own
    (to kill it whole); a dead worker's task comes back after a second. Logs to artifacts/<log>.log.
    It shares the tests' SECRET_KEY, as a deployment's web and workers share one: a Proxmox token
    the test stored is sealed with a key derived from it (dashboard/crypt.py)."""
    from django.conf import settings

    env = {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "CRS_SECRET_KEY": settings.SECRET_KEY,
        "CRS_TASK_VISIBILITY_TIMEOUT": "1",
    }
    return start(SINGLE_WORKER, env, ARTIFACTS / f"{log}.log", new_session=True)


def wait_until(predicate, timeout=60.0, step=0.1):
    """The predicate's value once truthy, polled; its docstring names it when time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(step)
    raise TimeoutError(f"not true after {timeout} s: {predicate.__doc__ or predicate}")


def keep_collecting(cluster):
    """A predicate's helper: a collect (and so a round) about every second, as beat would queue them."""
    from dashboard.tasks import collect

    last = [0.0]

    def tick():
        if time.monotonic() - last[0] > 1.0:
            last[0] = time.monotonic()
            collect.delay(cluster.pk)

    return tick


def race(action, timeout: float) -> None:
    """Run `action` in two threads released at once (two workers at the same step), each with its
    own database connection, closed after. A thread's exception is raised here, as is a thread
    still running after `timeout`: a race whose sides failed proves nothing. PostgreSQL only:
    SQLite refuses the second writer ("database table is locked") instead of making it wait."""
    import threading

    from django.db import connection

    service_or_skip("CRS_TEST_DATABASE_URL")
    barrier = threading.Barrier(2)
    raised = []

    def run():
        try:
            barrier.wait()
            action()
        except BaseException as error:
            raised.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(thread.is_alive() for thread in threads), f"a side of the race still runs after {timeout} s"
    if raised:
        raise raised[0]


@pytest.fixture
def pve(tmp_path):
    """The fake PVE over HTTPS (harness/fakepve) serving its recorded cluster; stopped after.
    The test fails if a request or an answer was outside Proxmox VE's API schema."""
    from harness.fakepve import FakePve

    fake = FakePve(tmp_path)
    fake.port = fake.start()
    yield fake
    fake.stop()
    assert not fake.strays, "outside Proxmox VE's API schema:\n" + "\n".join(dict.fromkeys(fake.strays))


@pytest.fixture(scope="session")
def embedded_server():
    """The browser run's one embedded product (runembedded, as `make run` starts it): its URL and
    environment. Started once, since a start (migrate, collect, demo) is the dearest step of a
    browser test; each module makes its own clusters on it (test_e2e_dashboard.own_cluster).
    The first hour's walk-through starts its own, on a fresh database. Its first collect
    compresses every static file: minutes on a busy machine, once."""
    log = f"{os.environ.get('CRS_TEST_RUN', 'e2e')}-server.log"  # make test's two browser runs: one each
    with embedded(log, E2E_PASSWORD, start_timeout=600) as served:
        yield served


@pytest.fixture
def redis_server():
    import shutil

    if not shutil.which("redis-server"):
        if REQUIRE_SERVICES:
            pytest.fail("redis-server is required (CRS_TEST_REQUIRE_SERVICES=1)")
        pytest.skip("redis-server is not installed")
    ARTIFACTS.mkdir(exist_ok=True)
    server = RedisServer(ARTIFACTS / "own-redis.log")
    server.start()
    yield server
    server.stop()


def make_migration(cluster, state, guest, source="node01", target="node06", **fields):
    """A migration of `guest` in `state`, as a round or a person left it."""
    from dashboard.models import Migration

    return Migration.objects.create(
        cluster=cluster,
        state=state,
        leader=guest,
        guests=[guest],
        source=source,
        target=target,
        imbalance_before=0.5,
        imbalance_after=0.4,
        relative_gain=0.2,
        margin=0.1,
        method="bruteforce",
        **fields,
    )


def guest_on(cluster, node):
    """A guest the cluster's snapshot places on `node`."""
    return next(g["sid"] for g in cluster.snapshot["guests"] if g["node"] == node)


def set_policy(cluster, **fields):
    """Change a cluster's settings as an admin does (saved: the hold restarts, the schedule follows)."""
    from dashboard.models import Policy

    policy = Policy.objects.get(cluster=cluster)
    for name, value in fields.items():
        setattr(policy, name, value)
    policy.save()


def run_rounds(cluster, count, capture):
    """`count` collects and rounds, each committed (pushes and approvals run)."""
    from dashboard.tasks import balancing_round, collect

    for _ in range(count):
        with capture(execute=True):
            collect.apply(args=[cluster.pk])
            balancing_round.apply(args=[cluster.pk])
