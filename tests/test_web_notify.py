"""Notifications through Apprise, delivered for real: a local webhook receiver (http.server,
Apprise's json://) and a local SMTP server (aiosmtpd, Apprise's mailto://). No mocks."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import free_port, migration_fields

from dashboard.celery import app
from dashboard.models import AuditEvent, Cluster, Migration, NotificationDestination
from dashboard.tasks import balancing_round, collect, finish

pytestmark = pytest.mark.django_db


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
    """As rounds.record does under automation: suggested and approved in one transaction."""
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
