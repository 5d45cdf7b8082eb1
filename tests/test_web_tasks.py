"""Collect and execution tasks: refused source data, restarts, and a real Celery worker running a round to done."""

import threading

import pytest
from conftest import set_policy, wait_until

from dashboard.models import AuditEvent, Cluster, Migration
from dashboard.tasks import collect


@pytest.mark.django_db
def test_refused_source_data_is_logged_not_stored(cluster, caplog):
    Cluster.objects.filter(pk=cluster.pk).update(source_config={"nodes": "twelve"})
    collect.apply(args=[cluster.pk])
    assert Cluster.objects.get(pk=cluster.pk).snapshot is None
    assert "simulator.nodes: 'twelve' is not a whole number" in caplog.text


@pytest.fixture
def worker():
    """A real Celery worker (threads pool) consuming the in-memory broker, as runembedded runs it."""
    from project.celery import app

    app.control.purge()  # rounds queued, never consumed, by earlier tests' collects
    controller = app.WorkController(
        pool="threads",
        concurrency=2,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        loglevel="WARNING",
    )
    thread = threading.Thread(target=controller.start, daemon=True)
    thread.start()
    yield controller
    controller.stop(in_sighandler=False)
    thread.join(10)


@pytest.mark.django_db(transaction=True)
def test_worker_runs_round_and_automatic_migration_to_done(cluster, worker):
    set_policy(cluster, hold_duration=0, automation="automatic")
    collect.delay(cluster.pk)

    def done():
        """a migration is done"""
        return Migration.objects.filter(state="done").first()

    migration = wait_until(done)
    assert migration.automatic and migration.decided_by is None and migration.progress == 1.0
    actions = list(AuditEvent.objects.filter(migration=migration).order_by("pk").values_list("action", "actor"))
    assert actions == [("suggested", None), ("approved", None), ("running", None), ("done", None)]
    collect.delay(cluster.pk)

    def moved():
        """the next collect shows the guest on its target"""
        guests = {g["sid"]: g["node"] for g in Cluster.objects.get(pk=cluster.pk).snapshot["guests"]}
        return guests[migration.leader] == migration.target

    wait_until(moved)


@pytest.mark.django_db
def test_restart_resumes_approved_and_running_migrations(suggested, monkeypatch):
    from dashboard import tasks

    queued = []
    monkeypatch.setattr(tasks.execute, "delay", lambda pk: queued.append(("execute", pk)))
    monkeypatch.setattr(tasks.follow, "delay", lambda pk: queued.append(("follow", pk)))
    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    tasks.reconcile(restarted=True)
    Migration.objects.transition(suggested.pk, "approved", "running", None)
    tasks.reconcile(restarted=True)
    assert queued == [("execute", suggested.pk), ("follow", suggested.pk)]


@pytest.mark.django_db
def test_running_migration_that_never_started_fails_with_reason(suggested, django_capture_on_commit_callbacks):
    from dashboard.tasks import follow

    Migration.objects.transition(suggested.pk, "suggested", "approved", None)
    Migration.objects.transition(suggested.pk, "approved", "running", None)
    with django_capture_on_commit_callbacks(execute=True):
        follow.apply(args=[suggested.pk])
    migration = Migration.objects.get(pk=suggested.pk)
    assert migration.state == "failed"
    assert migration.reason.startswith("the worker stopped while starting it; no migration task was recorded")


def test_every_celery_task_of_the_dashboard_is_queued_somewhere():
    """A task is a Celery message: one the code only ever calls in its own process (a round's
    follow-up, such as outcomes.measure or the power-downs' advance) is a plain function, since
    a per-round follow-up runs in the round's process after its commit (no message per round).
    Queued means the code names the task other than to call it (`.delay`, `.apply_async`, handed
    to queue_beside) or names it by its full name (beat's schedule, send_task). Read with `ast`."""
    import ast
    from pathlib import Path

    from project.celery import app

    root = Path(__file__).resolve().parent.parent
    app.loader.import_default_modules()
    declared = {name for name in app.tasks if name.startswith("dashboard.")}
    queued = set()
    for path in [*root.glob("dashboard/**/*.py"), *root.glob("project/*.py")]:
        tree = ast.parse(path.read_text())
        called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute) and id(node) not in called:
                queued.add(node.id if isinstance(node, ast.Name) else node.attr)
            elif isinstance(node, ast.Constant) and node.value in declared:
                queued.add(node.value.rsplit(".", 1)[1])
    assert {name for name in declared if name.rsplit(".", 1)[1] not in queued} == set()
