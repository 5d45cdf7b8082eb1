"""A collect holds no transaction or lock while it reads the cluster, and stores what it read once:
two collects at once store one snapshot, and a migration started meanwhile is not lost."""

import json
import threading
import time
from datetime import timedelta

import pytest
from conftest import race, service_or_skip, wait_until
from django.db import connection, transaction
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

import crs.snapshot
from crs.sources.simulator import Simulator
from dashboard import tasks
from dashboard.models import Cluster, GuestSample, Round
from dashboard.signals import schedule_name
from dashboard.tasks import collect, collect_and_round, collecting


@pytest.mark.django_db(transaction=True)
def test_no_transaction_is_open_while_the_adapter_reads_the_cluster(monkeypatch):
    cluster = Cluster.objects.create(name="watched", source_kind="simulator", source_config={"nodes": 4})
    seen = []
    real = Simulator.collect

    def collect_watched(self, now):
        seen.append(connection.in_atomic_block)
        return real(self, now)

    monkeypatch.setattr(Simulator, "collect", collect_watched)
    collect.apply(args=[cluster.pk])
    assert seen == [False]
    assert Cluster.objects.get(pk=cluster.pk).snapshot is not None


def test_a_migration_started_during_a_collect_is_kept_with_what_the_collect_read(collected):
    """The collect reads the state, a migration starts (and stores its task) before the collect
    stores: the stored state has both the collect's clock and the migration's task."""
    reading, source = Cluster.objects.opened_for_collect(collected.pk)
    snapshot = source.collect(collected.collected_at.timestamp() + 30)
    guest = snapshot.guests[0]
    target = next(n.name for n in snapshot.nodes if n.name != guest.node)
    with Cluster.objects.opened_source(collected.pk) as (_, starting):
        task = starting.migrate(guest.sid, target, collected.collected_at.timestamp() + 1)
    assert Cluster.objects.store_collected(reading, source, timezone.now(), snapshot={"stored": True})
    stored = Cluster.objects.get(pk=collected.pk)
    assert task in stored.source_state["tasks"]
    assert stored.snapshot == {"stored": True} and stored.collects_dropped == 0


def test_of_two_collects_at_once_the_one_that_began_later_is_the_snapshot_kept(collected):
    """Both read the cluster before either stores: whichever stores second, the stored snapshot
    is the one that began later; an older one storing second is dropped and counted."""
    began = collected.collected_at
    for first, second in ((1, 2), (2, 1)):
        reads = {k: Cluster.objects.opened_for_collect(collected.pk) for k in (first, second)}
        for k in (first, second):
            cluster, source = reads[k]
            started = began + timedelta(seconds=k)
            source.collect(started.timestamp())
            Cluster.objects.store_collected(cluster, source, started, snapshot={"collect": k})
        stored = Cluster.objects.get(pk=collected.pk)
        assert stored.snapshot == {"collect": 2}
        began += timedelta(seconds=10)
    assert stored.collects_dropped == 1  # the older one, when it came second


@pytest.mark.django_db(transaction=True)
def test_two_collects_at_once_store_the_snapshot_once_and_advance_the_simulator_once(monkeypatch):
    """Both read the simulator's state before either stores (they wait for each other inside
    the adapter), with a migration due to end: it ends once, and the stored state is one
    collect's, whichever stores last."""
    cluster = Cluster.objects.create(name="race", source_kind="simulator", source_config={"nodes": 4})
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    guest = cluster.snapshot["guests"][0]
    target = next(n["name"] for n in cluster.snapshot["nodes"] if n["name"] != guest["node"])
    with Cluster.objects.opened_source(cluster.pk) as (_, source):
        task = source.migrate(guest["sid"], target, time.time() - 3600)  # long ended by now
    both_read = threading.Barrier(2)
    real = Simulator.collect

    def collect_together(self, now):
        both_read.wait(10)
        return real(self, now)

    monkeypatch.setattr(Simulator, "collect", collect_together)
    monkeypatch.setattr(tasks, "collecting", lambda cluster_id, start: True)  # two workers, the mark away
    race(lambda: collect.apply(args=[cluster.pk]), 30)
    stored = Cluster.objects.get(pk=cluster.pk)
    assert stored.source_state["tasks"][task]["state"] == "done"
    assert stored.source_state["placement"][guest["sid"]] == target
    assert stored.source_state["next_task"] == 2  # no task made or lost by the merge
    kept = 3 - stored.collects_dropped  # the first collect's rows, and those of the race's stored ones
    assert GuestSample.objects.filter(cluster=stored).count() == kept * len(stored.snapshot["guests"])


def test_a_simulated_cluster_collects_and_runs_its_round_in_one_task_on_the_snapshot_in_hand(cluster, monkeypatch):
    """Beat runs collect_and_round for it: the round runs on the snapshot the collect built, not
    on the stored one read back and parsed."""
    schedule = PeriodicTask.objects.get(name=schedule_name(cluster.pk))
    assert (schedule.task, schedule.queue) == ("dashboard.tasks.collect_and_round", "celery")

    def parse(*args, **kwargs):
        raise AssertionError("the stored snapshot was parsed again")

    monkeypatch.setattr(crs.snapshot, "parse", parse)
    collect_and_round.apply(args=[cluster.pk])
    assert Round.objects.filter(cluster=cluster).count() == 1


def test_a_proxmox_cluster_collects_on_its_own_queue_and_queues_its_round(cluster):
    cluster.source_kind, cluster.source_config = "proxmox", {"host": "pve.example", "token": "root@pam!crs=secret"}
    cluster.save()
    schedule = PeriodicTask.objects.get(name=schedule_name(cluster.pk))
    assert (schedule.task, schedule.queue) == ("dashboard.tasks.collect", "proxmox")


def test_a_collect_due_while_the_last_one_still_runs_is_skipped_and_counted(cluster):
    """Beat's collect is skipped; one asked for now (a node into maintenance) is not."""
    schedule = PeriodicTask.objects.get(name=schedule_name(cluster.pk))
    assert collecting(cluster.pk, True)  # a collect of the cluster is running
    collect_and_round.apply(args=[cluster.pk], kwargs=json.loads(schedule.kwargs))
    skipped = Cluster.objects.get(pk=cluster.pk)
    assert (skipped.collects_skipped, skipped.snapshot) == (1, None)
    collect.apply(args=[cluster.pk])  # asked for now
    assert Cluster.objects.get(pk=cluster.pk).snapshot is not None
    collecting(cluster.pk, False)
    collect_and_round.apply(args=[cluster.pk], kwargs=json.loads(schedule.kwargs))
    assert Cluster.objects.get(pk=cluster.pk).collects_skipped == 1


@pytest.mark.django_db(transaction=True)
def test_a_node_marked_standby_while_a_collect_stores_stays_standby_in_what_it_stores(monkeypatch):
    """The admin marks a node standby (power.mark_standby: under the row lock, the stored snapshot
    says so at once) just as a collect has built its snapshot: what the collect stores says it
    too. CI saw it lost (test_web_power: the snapshot stored after the mark had no standby)."""
    from dashboard import ha, power
    from dashboard.models import CapacitySettings

    service_or_skip("CRS_TEST_DATABASE_URL")  # row locks and pg_locks: PostgreSQL's
    cluster = Cluster.objects.create(name="marked", source_kind="simulator", source_config={"nodes": 4})
    collect.apply(args=[cluster.pk])
    node = Cluster.objects.get(pk=cluster.pk).snapshot["nodes"][-1]["name"]
    built, marked = threading.Event(), threading.Event()
    real = ha.applied

    def applied_then_marked(c, snapshot):
        out = real(c, snapshot)
        if threading.current_thread().name == "collector":
            built.set()

            def waits():
                """the mark is made, or waits for the row lock this collect holds"""
                with connection.cursor() as cursor:
                    cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                    return marked.is_set() or cursor.fetchone()[0] > 0

            wait_until(waits, 30, 0.02)
        return out

    def mark() -> None:
        with transaction.atomic():
            locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
            power._listed_standby(locked, node)  # the standby list, into the stored snapshot at once
        marked.set()

    monkeypatch.setattr(ha, "applied", applied_then_marked)

    def collecting() -> None:
        try:
            collect.apply(args=[cluster.pk])
        finally:
            connection.close()

    collector = threading.Thread(target=collecting, name="collector")
    collector.start()
    assert built.wait(30)
    mark()
    collector.join(30)
    stored = Cluster.objects.get(pk=cluster.pk)
    assert CapacitySettings.objects.get(cluster=cluster).standby == [node]
    assert {n["name"] for n in stored.snapshot["nodes"] if n.get("standby")} == {node}


def test_a_collect_mark_left_by_a_killed_worker_is_taken_over_at_once(cluster):
    """A worker killed mid-collect leaves its mark; a worker on its host sees its process gone
    and collects at once instead of skipping every due collect until the mark lapses."""
    import subprocess
    import sys

    from django.core.cache import cache

    from dashboard.models.cluster import lease_holder

    schedule = PeriodicTask.objects.get(name=schedule_name(cluster.pk))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = lease_holder().rpartition(":")[0]
    cache.set(f"crs-collecting-{cluster.pk}", f"{host}:{gone.stdout.strip()}", 60)  # the dead worker's mark
    collect_and_round.apply(args=[cluster.pk], kwargs=json.loads(schedule.kwargs))
    taken = Cluster.objects.get(pk=cluster.pk)
    assert (taken.collects_skipped, taken.snapshot is not None) == (0, True)
    assert collecting(cluster.pk, True)  # and released after the collect, as always
    collecting(cluster.pk, False)
