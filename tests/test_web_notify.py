"""Notifications through Apprise, delivered for real: a local webhook receiver (http.server,
Apprise's json://) and a local SMTP server (aiosmtpd, Apprise's mailto://). No mocks."""

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import migration_fields, run_rounds, service_or_skip, set_policy
from django.db import connection
from django.db.models import F

from dashboard import notify
from dashboard.models import AuditEvent, Cluster, Migration, NotificationDestination
from dashboard.tasks import balancing_round, collect, finish
from harness.stack import free_port
from project.celery import app

pytestmark = pytest.mark.django_db
GIB = 1024**3


class Webhook:
    """An HTTP server on a free port that records each JSON body; the first `failures` calls answer 500."""

    def __init__(self, failures: int = 0):
        self.bodies, self.failures = [], failures
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                failing = hook.failures > 0
                hook.failures -= failing
                if not failing:
                    hook.bodies.append(body)
                self.send_response(500 if failing else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def eager():
    """Tasks run where they are queued, as a worker would run them (retries included)."""
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


def destination(cluster, url, events):
    return NotificationDestination.objects.create(cluster=cluster, name="ops", url=url, events=events)


def test_a_failed_migration_reaches_the_webhook_after_commit(
    eager, webhook, suggested, django_capture_on_commit_callbacks
):
    destination(suggested.cluster, webhook.url, ["migration-failed"])
    Migration.objects.filter(pk=suggested.pk).update(state="running")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        finish(suggested.pk, "failed", reason="target node went away")
        assert webhook.bodies == []  # nothing is sent before the transaction commits
    for callback in callbacks:
        callback()
    assert len(webhook.bodies) == 1
    body = webhook.bodies[0]
    assert "failed" in body["title"] and "target node went away" in body["message"]
    assert f"{suggested.source} → {suggested.target}" in body["message"]


def test_only_the_chosen_events_are_sent(eager, webhook, suggested, django_capture_on_commit_callbacks):
    destination(suggested.cluster, webhook.url, ["source-unreachable"])
    Migration.objects.filter(pk=suggested.pk).update(state="running")
    with django_capture_on_commit_callbacks(execute=True):
        finish(suggested.pk, "failed", reason="x")
    assert webhook.bodies == []


def test_a_waiting_recommendation_is_announced_once_the_round_commits(
    eager, webhook, cluster, django_capture_on_commit_callbacks
):
    destination(cluster, webhook.url, ["recommendation-waiting"])
    for _ in range(cluster.policy.hold_duration):  # the test cluster recommends after the hold
        with django_capture_on_commit_callbacks(execute=True):
            collect.apply(args=[cluster.pk])
            balancing_round.apply(args=[cluster.pk])
    waiting = list(Migration.objects.filter(state="suggested").order_by("step"))  # the round's plan, step by step
    assert len(waiting) > 1
    # one message for the plan, listing every move, not one per step
    assert [b["title"] for b in webhook.bodies] == [
        f"test: plan {waiting[0].plan} waits for approval ({len(waiting)} moves)"
    ]
    for m in waiting:
        assert f"Move {m.leader} {m.source} → {m.target}" in webhook.bodies[0]["message"]


def test_a_plan_failing_step_after_step_is_announced_once(
    eager, webhook, suggested, django_capture_on_commit_callbacks
):
    destination(suggested.cluster, webhook.url, ["migration-failed"])
    second = Migration.objects.create(**migration_fields(suggested), plan=7, step=1, after=0, state="running")
    Migration.objects.filter(pk=suggested.pk).update(plan=7, state="running")
    with django_capture_on_commit_callbacks(execute=True):
        finish(suggested.pk, "failed", reason="node06 went away")
    with django_capture_on_commit_callbacks(execute=True):
        finish(second.pk, "failed", reason="node06 went away")
    assert len(webhook.bodies) == 1 and "node06 went away" in webhook.bodies[0]["message"]
    assert AuditEvent.objects.filter(action="failed").count() == 2  # the trail keeps both


def test_a_recommendation_the_round_approves_itself_is_not_announced(
    eager, webhook, suggested, django_capture_on_commit_callbacks
):
    """As rounds.apply does under automation: suggested and approved in one transaction."""
    destination(suggested.cluster, webhook.url, ["recommendation-waiting"])
    with django_capture_on_commit_callbacks(execute=True):
        AuditEvent.objects.create(action="suggested", cluster=suggested.cluster, migration=suggested)
        Migration.objects.transition(suggested.pk, "suggested", "approved", None, automatic=True)
    assert webhook.bodies == []
    waiting = Migration.objects.create(**migration_fields(suggested))
    with django_capture_on_commit_callbacks(execute=True):  # the same, left waiting: announced
        AuditEvent.objects.create(action="suggested", cluster=suggested.cluster, migration=waiting)
    assert len(webhook.bodies) == 1
    assert webhook.bodies[0]["title"] == "test: a recommendation waits for approval (1 move)"


def test_an_unreachable_source_is_announced_once(eager, webhook, cluster, django_capture_on_commit_callbacks):
    destination(cluster, webhook.url, ["source-unreachable"])
    Cluster.objects.filter(pk=cluster.pk).update(source_config={"nodes": "twelve"})  # the simulator refuses it
    with django_capture_on_commit_callbacks(execute=True):
        collect.apply(args=[cluster.pk])
        collect.apply(args=[cluster.pk])  # still failing: no second message
    assert len(webhook.bodies) == 1
    assert webhook.bodies[0]["title"] == "test: the source is unreachable"


def test_a_refusing_destination_is_retried(eager, suggested, django_capture_on_commit_callbacks):
    hook = Webhook(failures=2)
    try:
        destination(suggested.cluster, hook.url, ["migration-failed"])
        Migration.objects.filter(pk=suggested.pk).update(state="running")
        with django_capture_on_commit_callbacks(execute=True):
            finish(suggested.pk, "failed", reason="x")
        assert len(hook.bodies) == 1 and hook.failures == 0  # two refusals, then delivered
    finally:
        hook.close()


def test_mail_through_a_local_smtp_server(admin_client, cluster):
    from aiosmtpd.controller import Controller

    class Inbox:
        messages = []

        async def handle_DATA(self, server, session, envelope):
            self.messages.append(envelope)
            return "250 OK"

    inbox = Inbox()
    port = free_port()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        url = f"mailto://127.0.0.1:{port}?from=crs@example.com&to=ops@example.com"
        created = admin_client.post(
            "/api/v1/notification-destinations/",
            {"cluster": cluster.pk, "name": "ops mail", "url": url, "events": ["migration-failed"]},
            content_type="application/json",
        )
        assert created.status_code == 201, created.content
        sent = admin_client.post(f"/api/v1/notification-destinations/{created.json()['id']}/test/")
        assert sent.status_code == 200 and sent.json() == {"sent": True}
    finally:
        controller.stop()
    (mail,) = inbox.messages
    assert mail.rcpt_tos == ["ops@example.com"] and b"test notification" in mail.content


def test_destinations_are_validated_by_apprise_and_admin_only(admin_client, client, operator, cluster):
    response = admin_client.post(
        "/api/v1/notification-destinations/",
        {"cluster": cluster.pk, "name": "x", "url": "nonsense://x", "events": ["exploded"]},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "Apprise does not recognise" in response.json()["url"][0]
    assert "events" in response.json()
    client.force_login(operator)
    assert client.get("/api/v1/notification-destinations/").status_code == 403  # URLs may hold secrets


def test_the_test_action_says_why_delivery_failed(admin_client, cluster):
    dead = destination(cluster, f"json://127.0.0.1:{free_port()}/hook", [])
    response = admin_client.post(f"/api/v1/notification-destinations/{dead.pk}/test/")
    assert response.status_code == 502 and response.json()["detail"]


def test_a_finished_plan_is_announced_once_with_its_counts(
    eager, webhook, suggested, django_capture_on_commit_callbacks
):
    destination(suggested.cluster, webhook.url, ["plan-finished"])
    second = Migration.objects.create(**migration_fields(suggested), plan=7, step=1, after=0, state="running")
    Migration.objects.filter(pk=suggested.pk).update(plan=7, state="running")
    with django_capture_on_commit_callbacks(execute=True):
        finish(suggested.pk, "done", progress=1.0)
    assert webhook.bodies == []  # a step still runs: the plan has not finished
    with django_capture_on_commit_callbacks(execute=True):
        finish(second.pk, "failed", reason="node06 went away")
    assert [b["title"] for b in webhook.bodies] == ["test: plan 7 finished: 1 done, 1 failed"]
    assert f"2. {second.leader} node01 → node06: failed" in webhook.bodies[0]["message"]
    with django_capture_on_commit_callbacks(execute=True):  # a step's end seen again (a retried worker)
        notify.plan_ended(second.pk)
    assert len(webhook.bodies) == 1
    (event,) = AuditEvent.objects.filter(action="plan-finished")  # the trail says it too
    assert event.details == {"plan": 7, "done": 1, "failed": 1}


def test_a_plan_nobody_ran_is_not_announced_as_finished(eager, webhook, suggested, django_capture_on_commit_callbacks):
    destination(suggested.cluster, webhook.url, ["plan-finished"])
    Migration.objects.filter(pk=suggested.pk).update(plan=8)
    with django_capture_on_commit_callbacks(execute=True):
        Migration.objects.transition(suggested.pk, "suggested", "rejected", None, reason="not now")
    assert webhook.bodies == [] and not AuditEvent.objects.filter(action="plan-finished").exists()


def test_imbalance_above_the_threshold_is_announced_once_per_episode(
    eager, webhook, cluster, django_capture_on_commit_callbacks
):
    """The test cluster's imbalance stays above the threshold; time is moved on by moving the
    episode's start back, as rounds an interval apart would."""
    dest = destination(cluster, webhook.url, ["imbalance-above"])
    NotificationDestination.objects.filter(pk=dest.pk).update(imbalance_for=timedelta(minutes=10))
    run_rounds(cluster, 2, django_capture_on_commit_callbacks)
    since = Cluster.objects.get(pk=cluster.pk).above_threshold_since
    assert since is not None and webhook.bodies == []  # above, but not for 10 minutes yet

    def ten_minutes_pass():
        Cluster.objects.filter(pk=cluster.pk).update(
            above_threshold_since=F("above_threshold_since") - timedelta(minutes=11)
        )

    ten_minutes_pass()
    run_rounds(cluster, 3, django_capture_on_commit_callbacks)
    assert [b["title"] for b in webhook.bodies] == ["test: imbalance above the threshold for 11 minutes"]
    assert "threshold 30.0%" in webhook.bodies[0]["message"]

    set_policy(cluster, threshold=0.99)  # falls to the threshold: the episode ends
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    assert Cluster.objects.get(pk=cluster.pk).above_threshold_since is None
    set_policy(cluster, threshold=0.3)  # a new episode, told again once it lasts
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    assert len(webhook.bodies) == 1
    ten_minutes_pass()
    run_rounds(cluster, 2, django_capture_on_commit_callbacks)
    assert len(webhook.bodies) == 2


def test_imbalance_for_is_checked_naming_the_field(admin_client, cluster):
    body = {"cluster": cluster.pk, "name": "ops", "url": "json://127.0.0.1:9/hook", "events": ["imbalance-above"]}
    for bad in ("soon", "-00:05:00", "8 00:00:00"):
        response = admin_client.post(
            "/api/v1/notification-destinations/", {**body, "imbalance_for": bad}, content_type="application/json"
        )
        assert response.status_code == 400, (bad, response.content)
        assert list(response.json()) == ["imbalance_for"], response.json()
    created = admin_client.post(
        "/api/v1/notification-destinations/", {**body, "imbalance_for": "00:30:00"}, content_type="application/json"
    )
    assert created.status_code == 201 and created.json()["imbalance_for"] == "00:30:00"


def tight_snapshot(memory_gib: int) -> dict:
    """Two 16 GiB nodes, two guests of `memory_gib` on each: losing one node puts all four on the other."""
    nodes = [{"name": f"node0{i}", "cpus": 16, "memory_bytes": 16 * GIB} for i in (1, 2)]
    guests = [
        {"sid": f"vm:{100 + i}", "node": f"node0{1 + i % 2}", "cores": 2, "memory_bytes": memory_gib * GIB}
        for i in range(4)
    ]
    return {"format": "crs-snapshot/1", "cluster": "tight", "nodes": nodes, "guests": guests}


def test_the_n1_verdict_turning_bad_is_announced_once(eager, webhook, django_capture_on_commit_callbacks):
    cluster = Cluster.objects.create(
        name="tight", source_kind="snapshot", source_config={"snapshot": tight_snapshot(3)}
    )
    destination(cluster, webhook.url, ["n1-bad"])

    def rounds_with_a_fresh_verdict(**policy):
        set_policy(cluster, **policy)
        Cluster.objects.filter(pk=cluster.pk).update(n1_at=None)  # due again, as a minute later
        run_rounds(cluster, 1, django_capture_on_commit_callbacks)
        return Cluster.objects.get(pk=cluster.pk).n1["survives"]

    assert rounds_with_a_fresh_verdict() is True and webhook.bodies == []
    assert rounds_with_a_fresh_verdict(memory_reserve_bytes=8 * GIB) is False  # 12 GiB onto 8 GiB left free
    assert rounds_with_a_fresh_verdict() is False  # still bad: not told again
    assert [b["title"][:35] for b in webhook.bodies] == ["tight: N+1 turned bad: losing node0"]
    assert "overloads" in webhook.bodies[0]["message"]
    assert rounds_with_a_fresh_verdict(memory_reserve_bytes=0) is True
    assert rounds_with_a_fresh_verdict(memory_reserve_bytes=8 * GIB) is False  # bad again: a new change, told again
    assert len(webhook.bodies) == 2


def test_the_admin_site_adds_a_destination_with_ticked_events_and_sends_a_test(admin_client, webhook, cluster):
    form = {
        "cluster": cluster.pk,
        "name": "ops hook",
        "url": webhook.url,
        "events": ["plan-finished", "n1-bad"],
        "imbalance_for": "00:20:00",
    }
    answer = admin_client.post("/admin/dashboard/notificationdestination/add/", form)
    assert answer.status_code == 302, answer.content
    added = NotificationDestination.objects.get(name="ops hook")
    assert added.events == ["plan-finished", "n1-bad"] and added.imbalance_for == timedelta(minutes=20)
    dead = destination(cluster, f"json://127.0.0.1:{free_port()}/hook", [])
    answer = admin_client.post(
        "/admin/dashboard/notificationdestination/",
        {"action": "send_test", "_selected_action": [added.pk, dead.pk]},
        follow=True,
    )
    shown = [str(m) for m in answer.context["messages"]]
    assert "ops hook: test notification sent" in shown
    assert any(m.startswith("ops: not delivered: ") for m in shown)
    assert [b["title"] for b in webhook.bodies] == ["test: test notification"]


@pytest.mark.django_db(transaction=True)
def test_the_last_two_steps_ending_at_once_announce_the_plan_once(eager, webhook, suggested):
    """Each step's end looks at its plan after its own commit, under the cluster's row lock: the
    later one sees both ended, and of two that both do, one records it."""
    service_or_skip("CRS_TEST_DATABASE_URL")
    destination(suggested.cluster, webhook.url, ["plan-finished"])
    second = Migration.objects.create(**migration_fields(suggested), plan=9, step=1, after=0, state="running")
    Migration.objects.filter(pk=suggested.pk).update(plan=9, state="running")
    barrier = threading.Barrier(2)

    def end(pk):
        barrier.wait()
        try:
            finish(pk, "done", progress=1.0)
        finally:
            connection.close()

    threads = [threading.Thread(target=end, args=[pk]) for pk in (suggested.pk, second.pk)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [b["title"] for b in webhook.bodies] == ["test: plan 9 finished: 2 done, 0 failed"]
    assert AuditEvent.objects.filter(action="plan-finished").count() == 1
