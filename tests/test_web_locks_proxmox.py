"""A nightly backup locks guest after guest of a Proxmox cluster (the fake PVE over HTTPS) while
automation runs: no locked guest is migrated, nothing fails, an approved move waits for its
guest's lock and a refusal for a lock puts the move back to approved (issue 35 item 6)."""

import copy
from datetime import timedelta

import pytest
from conftest import make_migration, run_rounds, set_policy

from dashboard import executor, tasks
from dashboard.models import AuditEvent, Cluster, Migration
from dashboard.tasks import collect
from harness.fakepve import TOKEN

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker(monkeypatch, django_capture_on_commit_callbacks):
    """What a Celery worker does with the migrations' tasks, in this process: `work()` runs every
    queued start and poll, in order, until none is left."""
    queue = []
    monkeypatch.setattr(executor, "FOLLOW_SECONDS", 0.0)  # each poll may follow the one before at once
    monkeypatch.setattr(tasks.execute, "delay", lambda pk: queue.append((tasks.execute, pk)))
    monkeypatch.setattr(tasks.follow, "delay", lambda pk: queue.append((tasks.follow, pk)))
    monkeypatch.setattr(tasks.follow, "apply_async", lambda args, **options: queue.append((tasks.follow, args[0])))

    def work():
        for _ in range(200):
            if not queue:
                return
            task, pk = queue.pop(0)
            with django_capture_on_commit_callbacks(execute=True):
                task.apply(args=[pk])
        raise AssertionError(f"the worker never ran dry: {queue}")

    return work


@pytest.fixture
def cluster(pve):
    """Four more copies of a recorded VM on node1, automation on, every worthwhile move made."""
    for vmid in (201, 202, 203, 204):
        vm = copy.deepcopy(pve.entry("qemu/100"))
        vm.update(id=f"qemu/{vmid}", vmid=vmid, name=f"extra{vmid}", node="node1")
        pve.resources.append(vm)
    config = {"host": "127.0.0.1", "port": pve.port, "token": TOKEN, "verify_ssl": pve.ca_file, "slow_reads_s": 0}
    cluster = Cluster.objects.create(name="pve", source_kind="proxmox", source_config=config)
    set_policy(cluster, hold_duration=0, automation="automatic", threshold=0.0, target_imbalance=0.0, margin=0.0)
    return cluster


def migrations_asked(pve) -> list[str]:
    return [path for method, path, _ in pve.requests if method == "POST" and path.endswith("/migrate")]


def test_a_nightly_backup_locks_guests_in_turn_and_no_migration_fails(
    pve, cluster, worker, django_capture_on_commit_callbacks
):
    """The backup holds vm:201 when the first round plans: no plan takes it. Then, turn after
    turn, it reaches the next guest just as the product asks to migrate it: Proxmox refuses, the
    move waits, and runs once that guest's backup is done."""
    pve.entry("qemu/201")["lock"] = "backup"
    for turn, reached in enumerate(("backup", "backup", None, None)):
        run_rounds(cluster, 1, django_capture_on_commit_callbacks)  # the backup holds the guest it reached last
        if turn == 0:
            planned = [sid for m in Migration.objects.filter(cluster=cluster) for sid in m.guests]
            assert planned and "vm:201" not in planned
        for entry in pve.resources:
            if entry.get("lock") == "backup":
                del entry["lock"]  # that guest's backup is done; the next one's starts
        pve.lock_next = reached
        tasks.requeue_stalled(cluster.pk, after=timedelta(0))  # as the rounds do once a move waited 30 s
        worker()
    refusals = [e.details.get("reason", "") for e in AuditEvent.objects.filter(action="approved", actor=None)]
    moves = Migration.objects.filter(cluster=cluster)
    assert sum("(Proxmox refused its migration)" in r for r in refusals) == 2
    assert moves.filter(state="done").count() >= 2  # the backup did not stop balancing
    assert not moves.filter(state="failed").exists()


def test_an_approved_move_waits_for_its_guest_s_lock_and_a_refusal_for_one_is_no_failure(
    pve, cluster, worker, django_capture_on_commit_callbacks, admin_client
):
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)  # the plan approves itself; its starts queue
    first = Migration.objects.filter(cluster=cluster, state="approved").order_by("plan", "step").first()
    resource = f"qemu/{first.leader.removeprefix('vm:')}"
    pve.entry(resource)["lock"] = "backup"  # the backup reached it before the worker did
    worker()
    first.refresh_from_db()
    assert (first.state, first.reason) == ("approved", f"waits: {first.leader} is locked: backup")
    assert not [p for p in migrations_asked(pve) if p.endswith(f"/{resource}/migrate")]
    collect.apply(args=[cluster.pk])
    page = admin_client.get(f"/clusters/{cluster.pk}/").content.decode()
    assert f"<strong>{first.leader}</strong> on node1: locked: backup" in page  # among those that cannot move

    del pve.entry(resource)["lock"]  # the backup is done, but a snapshot job takes the lock first
    pve.lock_next = "snapshot"
    tasks.requeue_stalled(cluster.pk, after=timedelta(0))  # as the rounds do once it waited 30 s
    worker()
    first.refresh_from_db()
    assert (first.state, first.reason) == ("approved", f"waits: {first.leader} is locked: snapshot")
    back = [e.details.get("reason") for e in AuditEvent.objects.filter(migration=first, action="approved")]
    assert f"waits: {first.leader} is locked: snapshot (Proxmox refused its migration)" in back

    del pve.entry(resource)["lock"]
    tasks.requeue_stalled(cluster.pk, after=timedelta(0))
    worker()
    first.refresh_from_db()
    assert (first.state, pve.entry(resource)["node"]) == ("done", first.target)
    assert not Migration.objects.filter(cluster=cluster, state="failed").exists()


def test_a_container_s_migration_task_that_ends_locked_puts_the_move_back_to_wait(
    pve, cluster, worker, django_capture_on_commit_callbacks
):
    set_policy(cluster, containers="restart")
    collect.apply(args=[cluster.pk])
    move = make_migration(cluster, "suggested", "ct:300", "node4", "node1")
    Migration.objects.transition(move.pk, "suggested", "approved", None)
    pve.lock_next = "backup"  # pve-container checks the lock in its task: the task fails
    tasks.execute.delay(move.pk)
    worker()
    move.refresh_from_db()
    assert (move.state, move.reason) == ("approved", "waits: ct:300 is locked: backup")
    back = [e.details.get("reason") for e in AuditEvent.objects.filter(migration=move, action="approved")]
    assert "waits: ct:300 is locked: backup (Proxmox refused its migration)" in back
