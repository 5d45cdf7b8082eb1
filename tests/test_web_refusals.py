"""Requests the product must refuse with a reason, and answers that must stay JSON."""

import pytest
from django.db import OperationalError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.urls import reverse

from dashboard.models import AuditEvent, Cluster, Migration

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "change, refusal",
    [
        ({"source_kind": "snapshot"}, "cluster test is a read-only what-if cluster: nothing is migrated there"),
        ({"archived": True}, "cluster test is archived: it runs no rounds and no migrations"),
    ],
)
def test_approvals_on_what_if_and_archived_clusters_are_refused_saying_why(
    client, operator, suggested, change, refusal
):
    Cluster.objects.filter(pk=suggested.cluster_id).update(**change)
    client.force_login(operator)
    response = client.post(reverse("api:recommendation-approve", args=[suggested.pk]))
    assert response.status_code == 409 and response.json()["detail"] == refusal
    assert Migration.objects.get(pk=suggested.pk).state == "suggested"


def test_a_reject_that_was_not_recorded_answers_409(client, operator, suggested):
    client.force_login(operator)
    url = reverse("api:recommendation-reject", args=[suggested.pk])
    assert client.post(url, {"reason": "first"}).status_code == 200
    late = client.post(url, {"reason": "second"})  # as the loser of two concurrent rejects
    assert late.status_code == 409
    assert late.json()["detail"] == (
        f"migration {suggested.pk} was rejected by someone else first: this decision was not recorded"
    )
    assert AuditEvent.objects.get(action="rejected").details["reason"] == "first"


def test_healthz_is_a_json_503_when_the_database_is_down(client, admin, monkeypatch):
    client.force_login(admin)  # a session to read: that needs the database too

    def down(self, *args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(BaseDatabaseWrapper, "cursor", down)
    response = client.get("/healthz")
    assert response.status_code == 503 and response["Content-Type"] == "application/json"
    assert response.json()["database"] == "error: connection refused"


def test_password_reset_is_not_offered_without_mail(client):
    assert client.get("/accounts/password_reset/").status_code == 404
    assert "password_reset" not in client.get("/accounts/login/").content.decode()


def test_an_unchanged_settings_save_records_nothing_and_keeps_the_hold(admin_client, cluster):
    from conftest import policy_form

    Cluster.objects.filter(pk=cluster.pk).update(hold_count=2)
    response = admin_client.post(reverse("dashboard:settings", args=[cluster.pk]), policy_form())
    assert response.status_code == 302
    assert not AuditEvent.objects.filter(action="settings-changed").exists()
    assert Cluster.objects.get(pk=cluster.pk).hold_count == 2
    admin_client.post(reverse("dashboard:settings", args=[cluster.pk]), policy_form(threshold=20))
    assert AuditEvent.objects.get(action="settings-changed").details["changes"] == {"threshold": [0.3, 0.2]}
    assert Cluster.objects.get(pk=cluster.pk).hold_count == 0


def test_a_cluster_name_with_a_line_break_is_refused_in_the_admin(client, django_user_model):
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(superuser)
    response = client.post(
        "/admin/dashboard/cluster/add/",
        {"name": "lab\r\nX-Injected: 1", "source_kind": "simulator", "source_config": "{}"},
    )
    assert response.status_code == 200
    assert "name must not contain line breaks, tabs or other control characters" in response.content.decode()
    assert not Cluster.objects.filter(name__startswith="lab").exists()
