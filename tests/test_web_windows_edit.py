"""Editing change windows and blackouts through the API (PATCH), and approved automatic moves
waiting for the window: a plan approved inside a window does not start after it closed."""

import threading
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from conftest import run_rounds, service_or_skip, set_policy
from django.db import connection
from django.test import Client
from django.urls import reverse

from dashboard.models import WEEKDAYS, AuditEvent, Blackout, ChangeWindow, Cluster, Migration
from dashboard.tasks import execute

pytestmark = pytest.mark.django_db
BERLIN = ZoneInfo("Europe/Berlin")


def window(cluster, start="22:00", end="06:00", days=(0, 4)):
    return ChangeWindow.objects.create(cluster=cluster, days=list(days), start=start, end=end)


def blackout(cluster, starts_at, ends_at, label="backups"):
    return Blackout.objects.create(cluster=cluster, label=label, starts_at=starts_at, ends_at=ends_at)


def patch(client, path, body):
    return client.patch(path, body, content_type="application/json")


def test_a_window_is_edited_with_patch_and_the_trail_says_what_changed(admin_client, cluster):
    w = window(cluster)
    answer = patch(admin_client, f"/api/v1/change-windows/{w.pk}/", {"end": "05:30", "days": [5, 5, 6]})
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"id": w.pk, "cluster": cluster.pk, "days": [5, 6], "start": "22:00:00", "end": "05:30:00"}
    (event,) = AuditEvent.objects.filter(action="window-changed")
    assert event.details["changes"] == {"days": [[0, 4], [5, 6]], "end": ["06:00", "05:30"]}
    status = admin_client.get(f"/api/v1/clusters/{cluster.pk}/automation/").json()
    assert [(x["days"], x["start"], x["end"]) for x in status["windows"]] == [([5, 6], "22:00", "05:30")]
    same = patch(admin_client, f"/api/v1/change-windows/{w.pk}/", {"end": "05:30"})  # a retry changes nothing
    assert same.status_code == 200 and AuditEvent.objects.filter(action="window-changed").count() == 1


def test_a_blackout_is_moved_with_patch(admin_client, cluster):
    b = blackout(cluster, datetime(2026, 11, 29, 1, tzinfo=BERLIN), datetime(2026, 11, 29, 4, tzinfo=BERLIN))
    answer = patch(admin_client, f"/api/v1/blackouts/{b.pk}/", {"ends_at": "2026-11-29T05:00+01:00"})
    assert answer.status_code == 200, answer.content
    b.refresh_from_db()
    assert b.ends_at == datetime(2026, 11, 29, 5, tzinfo=BERLIN) and b.label == "backups"
    assert AuditEvent.objects.get(action="blackout-changed").details["changes"] == {
        "ends_at": ["2026-11-29T03:00:00+00:00", "2026-11-29T04:00:00+00:00"]
    }


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"days": [7]}, "days", "0 (Monday) … 6 (Sunday)"),
        ({"days": "Mon"}, "days", "list"),
        ({"start": "25:00"}, "start", "hh:mm"),
        ({"start": "06:00"}, "end", "end must differ from start"),  # with the kept end: a window of no time
        ({"cluster": "other"}, "cluster", "cannot change"),
        ({"ends": "05:00"}, "ends", "the fields are: cluster, days, start, end"),
    ],
)
def test_bad_patches_are_refused_naming_the_field(admin_client, cluster, body, field, words):
    other = Cluster.objects.create(name="other")
    w = window(cluster)
    body = {k: other.pk if v == "other" else v for k, v in body.items()}
    answer = patch(admin_client, f"/api/v1/change-windows/{w.pk}/", body)
    assert answer.status_code == 400, answer.content
    assert list(answer.json()) == [field] and words in " ".join(answer.json()[field])
    assert ChangeWindow.objects.get(pk=w.pk).end.strftime("%H:%M") == "06:00"
    assert not AuditEvent.objects.exists()


def test_a_blackout_patched_to_end_before_it_starts_is_refused(admin_client, cluster):
    b = blackout(cluster, datetime(2026, 11, 29, 1, tzinfo=BERLIN), datetime(2026, 11, 29, 4, tzinfo=BERLIN), "x")
    answer = patch(admin_client, f"/api/v1/blackouts/{b.pk}/", {"starts_at": "2026-11-29T06:00+01:00"})
    assert answer.status_code == 400 and "ends_at must be after starts_at" in answer.json()["ends_at"][0]


def test_patches_need_the_settings_permission_and_an_existing_window(operator, admin_client, cluster):
    w = window(cluster)
    client = Client()
    client.force_login(operator)
    assert patch(client, f"/api/v1/change-windows/{w.pk}/", {"end": "05:00"}).status_code == 403
    assert patch(admin_client, "/api/v1/change-windows/99999/", {"end": "05:00"}).status_code == 404
    assert admin_client.put(f"/api/v1/change-windows/{w.pk}/", {}, content_type="application/json").status_code == 405


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_patches_valid_alone_cannot_together_make_a_window_of_no_time(admin, cluster):
    """08:00–06:00 and 22:00–08:00 are each a window; together 08:00–08:00 is none. The second
    to take the row's lock sees the first and is refused, whatever the interleaving."""
    service_or_skip("CRS_TEST_DATABASE_URL")
    assert connection.vendor == "postgresql"
    w = window(cluster)
    barrier = threading.Barrier(2)
    answers = {}

    def send(body):
        client = Client()
        client.force_login(admin)
        barrier.wait()
        try:
            answers[next(iter(body))] = patch(client, f"/api/v1/change-windows/{w.pk}/", body)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=[b]) for b in ({"start": "08:00"}, {"end": "08:00"})]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(a.status_code for a in answers.values()) == [200, 400]
    refused = next(a for a in answers.values() if a.status_code == 400)
    assert "end must differ from start" in refused.json()["end"][0]
    w.refresh_from_db()
    assert w.start != w.end
    assert AuditEvent.objects.filter(action="window-changed").count() == 1


# -- approved automatic moves wait for the window ----------------------------------------------------


def automatic_plan_approved_in_a_window(cluster, capture) -> list[Migration]:
    """A round inside an all-day window approves its plan; nobody starts it yet (no worker)."""
    set_policy(cluster, hold_duration=0, automation="automatic", time_zone="Europe/Berlin")
    now = datetime.now(BERLIN)
    open_now = ChangeWindow.objects.create(
        cluster=cluster,
        days=list(range(7)),
        start=(now - timedelta(hours=1)).time().replace(second=0, microsecond=0),
        end=(now + timedelta(hours=2)).time().replace(second=0, microsecond=0),
    )
    run_rounds(cluster, 1, capture)
    approved = list(Migration.objects.filter(cluster=cluster, state="approved", automatic=True).order_by("step"))
    assert approved
    return approved, open_now


def test_an_approved_move_waits_when_the_window_closed_and_says_for_which(
    admin_client, cluster, django_capture_on_commit_callbacks
):
    approved, open_now = automatic_plan_approved_in_a_window(cluster, django_capture_on_commit_callbacks)
    # The window closes before a worker gets to it: it now runs 02:00–05:00 three days from now only.
    day = (datetime.now(BERLIN).weekday() + 3) % 7
    answer = patch(
        admin_client, f"/api/v1/change-windows/{open_now.pk}/", {"days": [day], "start": "02:00", "end": "05:00"}
    )
    assert answer.status_code == 200
    first = approved[0]
    execute(first.pk)
    first.refresh_from_db()
    assert first.state == "approved" and first.started_at is None
    assert first.reason == f"waiting for the window {WEEKDAYS[day]} 02:00–05:00 (Europe/Berlin)"
    served = admin_client.get(f"/api/v1/migrations/{first.pk}/").json()
    assert served["state"] == "approved" and served["reason"] == first.reason
    loaded = admin_client.get(reverse("api:cluster-state", args=[cluster.pk])).json()  # what the page loads
    row = next(m for m in loaded["migrations"] if m["id"] == first.pk)
    assert (row["state"], row["reason"]) == ("approved", first.reason)  # the row shows it beside "approved"
    execute(first.pk)  # every round queues it again: the trail says it once
    assert AuditEvent.objects.filter(action="start-held", migration=first).count() == 1
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)  # the status line says it too
    status = admin_client.get(reverse("api:cluster-state", args=[cluster.pk])).json()
    assert status["rounds"][-1]["explanation"]["waiting"].endswith(f"until it finishes; {first.reason}")


def test_a_waiting_move_starts_when_the_next_window_opens(cluster, django_capture_on_commit_callbacks, monkeypatch):
    approved, open_now = automatic_plan_approved_in_a_window(cluster, django_capture_on_commit_callbacks)
    first = approved[0]
    # closed now, opens again in an hour
    blackout(cluster, datetime.now(BERLIN) - timedelta(minutes=1), datetime.now(BERLIN) + timedelta(hours=1))
    execute(first.pk)
    first.refresh_from_db()
    assert first.state == "approved" and first.reason.startswith("waiting for the blackout backups to end ")
    # The blackout ends: the next round queues the waiting move again (as for any approved move
    # not started within STALLED_APPROVAL), and it starts.
    Blackout.objects.filter(cluster=cluster).update(ends_at=datetime.now(BERLIN) - timedelta(seconds=1))
    Migration.objects.filter(pk=first.pk).update(decided_at=datetime.now(BERLIN) - timedelta(minutes=1))
    started = []
    monkeypatch.setattr(execute, "delay", started.append)
    run_rounds(cluster, 1, django_capture_on_commit_callbacks)
    assert first.pk in started
    execute(first.pk)
    first.refresh_from_db()
    assert first.state in ("running", "done") and first.reason == ""


def test_a_person_approving_outside_the_windows_is_not_held(cluster, django_capture_on_commit_callbacks):
    """Outside the windows recommendations wait for a person; the person's approval starts."""
    approved, open_now = automatic_plan_approved_in_a_window(cluster, django_capture_on_commit_callbacks)
    first = approved[0]
    Migration.objects.filter(pk=first.pk).update(automatic=False)  # as if a person had approved it
    blackout(cluster, datetime.now(BERLIN) - timedelta(minutes=1), datetime.now(BERLIN) + timedelta(hours=1))
    execute(first.pk)
    first.refresh_from_db()
    assert first.state in ("running", "done")
