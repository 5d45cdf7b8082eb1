"""PostgreSQL goes away for 10 s under the distributed mode (daphne, worker, beat as `make web`,
`make worker`, `make beat` run them, production settings) while a migration runs: /healthz says
so as JSON, and once the database returns the migration settles (done, as the adapter says) within 60 s
instead of staying "running" forever.

The machine's PostgreSQL is shared, so the outage is a real TCP fault in between: the stack
reaches the database through harness/tcpproxy.py, which the test closes (open connections reset,
new ones refused) and reopens.
"""

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import timedelta

import pytest
from conftest import FAST_SIMULATOR, guest_on, make_migration, service_or_skip, shared_database_url
from django.conf import settings
from django.utils import timezone

from dashboard import tasks
from dashboard.models import Cluster, Migration, Policy, Round
from harness.stack import ARTIFACTS, processes_of_a_stack, stop, wait_for_port
from harness.tcpproxy import TcpProxy, in_front_of_database

OUTAGE = 10  # seconds (the fault soak keeps the long outages)
SETTLE = 60  # seconds after the database returns: issue 12's target
MIGRATION = 5  # seconds the migration takes at the adapter: it ends while the database is away


def healthz(base: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_for(predicate, timeout: float, what: str, every: float = 0.5) -> float:
    """Seconds until `predicate` holds, polling every `every` seconds (twice a second)."""
    began = time.monotonic()
    while not predicate():
        if time.monotonic() - began > timeout:
            raise TimeoutError(f"{what}: not after {timeout} s")
        time.sleep(every)
    return time.monotonic() - began


def state(pk: int) -> str:
    return Migration.objects.values_list("state", flat=True).get(pk=pk)


def stack_behind_a_proxy(redis_server, name: str) -> tuple[TcpProxy, int, list]:
    """The distributed stack on the test's database, reached through a TCP proxy the test can
    close: (the proxy, the web's port, the processes)."""
    proxy, via_proxy = in_front_of_database(shared_database_url())
    env = {
        "DATABASE_URL": via_proxy,
        "REDIS_URL": redis_server.url,
        "CRS_SECRET_KEY": settings.SECRET_KEY,
    }
    return proxy, *processes_of_a_stack(env, name)


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers
def test_a_migration_running_across_a_postgres_outage_settles_within_60_s(redis_server):
    service_or_skip("CRS_TEST_DATABASE_URL")
    cluster = Cluster.objects.create(name="pg-outage", source_kind="simulator", source_config=FAST_SIMULATOR)
    Policy.objects.filter(cluster=cluster).update(round_interval_s=1)
    Policy.objects.get(cluster=cluster).save()  # the beat schedule follows saved settings
    tasks.collect.apply(args=[cluster.pk])  # in-process: the round it queues goes nowhere
    cluster.refresh_from_db()
    guest = guest_on(cluster, "node01")
    memory = next(g["memory_bytes"] for g in cluster.snapshot["guests"] if g["sid"] == guest)
    cluster.source_config = {**FAST_SIMULATOR, "migration_mib_s": memory / 2**20 / MIGRATION}
    cluster.save(update_fields=["source_config"])
    # Approved a while ago and not started (its message lost): the stack's next round queues it.
    migration = make_migration(cluster, "approved", guest, decided_at=timezone.now() - timedelta(minutes=1))

    proxy, port, processes = stack_behind_a_proxy(redis_server, "pg-outage")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(port, processes[0])
        wait_for(lambda: Cluster.objects.get(pk=cluster.pk).last_round_at, 120, "the stack's first round")
        started = Migration.objects.filter(pk=migration.pk, state="running").exclude(task_ids=[])
        wait_for(started.exists, 90, "the stack starts the approved migration at the adapter")
        assert healthz(base)[0] == 200  # the web's first request may be a probe: it finds the database

        # A round's lease may still be held when the database returns (its worker hung, or the
        # outage outlasted the release's retries): rounds stay blocked up to ROUND_LEASE. The
        # follower must not depend on them (seen in CI with a 120 s lease: not settled 90 s after
        # the return). A round the outage cut releases its own: the test below.
        Cluster.objects.filter(pk=cluster.pk).update(round_lease_until=timezone.now() + Cluster.objects.ROUND_LEASE)
        proxy.close()
        outage = time.monotonic()
        status, health = healthz(base)
        assert status == 503 and health["database"].startswith("error"), health
        time.sleep(max(0.0, OUTAGE - (time.monotonic() - outage)))
        assert state(migration.pk) == "running"  # ended at the adapter meanwhile; nobody could record it
        proxy.open()

        returned = time.monotonic()
        settled = wait_for(lambda: state(migration.pk) != "running", SETTLE + 30, "the migration settles")
        # The web's pool reconnects with its own backoff: the page answers again within the same bound.
        wait_for(lambda: healthz(base)[0] == 200, SETTLE + 30, "the web answers again")
        answering = time.monotonic() - returned
        status, health = healthz(base)
    finally:
        for process in processes:
            stop(process)
        proxy.shut()
    assert state(migration.pk) == "done"  # as the adapter says: it ended while the database was away
    assert settled <= SETTLE
    assert answering <= SETTLE and status == 200 and health["database"] == "ok", (answering, health)
    with (ARTIFACTS / "pg-outage-figures.txt").open("a") as figures:
        figures.write(
            f"PostgreSQL down {OUTAGE} s under a running migration: settled (done) {settled:.1f} s after it returned, "
            f"/healthz ok {answering:.1f} s after\n"
        )


@pytest.mark.django_db(transaction=True)
@pytest.mark.servers
def test_a_round_cut_by_a_postgres_outage_frees_its_cluster_as_soon_as_the_database_returns(redis_server):
    """A round in flight when the database goes away cannot write its lease's release then. Its
    worker lives on, so no other takes the lease over: the cluster had no round until the lease
    lapsed, 50 s after the database returned (the fault soak: 56.6 s without a round on the
    page). Now the round's worker releases it once the database is back."""
    service_or_skip("CRS_TEST_DATABASE_URL")
    cluster = Cluster.objects.create(name="pg-cut-round", source_kind="simulator", source_config=FAST_SIMULATOR)
    Policy.objects.filter(cluster=cluster).update(round_interval_s=1)
    Policy.objects.get(cluster=cluster).save()  # the beat schedule follows saved settings
    lease = Cluster.objects.filter(pk=cluster.pk).values_list("round_lease_holder", flat=True)

    proxy, port, processes = stack_behind_a_proxy(redis_server, "pg-cut-round")
    try:
        wait_for(lambda: Cluster.objects.get(pk=cluster.pk).last_round_at, 120, "the stack's first round")
        for _ in range(5):  # until the outage cuts a round: its lease still held once the database is away
            # a round holds its lease for a fraction of a second
            wait_for(lambda: lease.get() != "", 30, "a round running", every=0.005)
            proxy.close()
            if lease.get():
                break
            proxy.open()  # the round ended (and released) just before the cut: try again
        else:
            pytest.fail("no outage cut a round in five tries")
        time.sleep(OUTAGE)
        proxy.open()
        returned = timezone.now()
        back = wait_for(
            lambda: Round.objects.filter(cluster=cluster, at__gt=returned).exists(), 90, "a round after the return"
        )
    finally:
        for process in processes:
            stop(process)
        proxy.shut()
    with (ARTIFACTS / "pg-outage-figures.txt").open("a") as figures:
        figures.write(f"PostgreSQL down {OUTAGE} s under a round: the next round {back:.1f} s after it returned\n")
    assert back <= 15, f"the first round came {back:.1f} s after the database returned (the lease lapses after 60 s)"
