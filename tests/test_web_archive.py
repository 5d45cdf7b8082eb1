"""Retiring a cluster: archived, it runs no rounds and leaves the page's list, but its history
and audit trail stay (clusters with a history are never deleted)."""

import json

import pytest
from django.urls import reverse
from django_celery_beat.models import PeriodicTask, PeriodicTasks

from dashboard.models import AuditEvent, Cluster
from dashboard.signals import schedule_name
from dashboard.tasks import collect

pytestmark = pytest.mark.django_db


def admin_form(cluster, **changes):
    return {
        "name": cluster.name,
        "source_kind": cluster.source_kind,
        "source_config": json.dumps(cluster.source_config),
        "archived": "on",
        **changes,
    }


def test_archiving_stops_rounds_hides_the_cluster_and_keeps_its_history(admin_client, collected):
    kept = collected.snapshot
    other = Cluster.objects.create(name="other", source_kind="simulator", source_config={"nodes": 3})
    url = reverse("admin:dashboard_cluster_change", args=[collected.pk])
    read = PeriodicTasks.last_change()
    assert admin_client.post(url, admin_form(collected)).status_code == 302

    assert not PeriodicTask.objects.get(name=schedule_name(collected.pk)).enabled
    assert PeriodicTask.objects.get(name=schedule_name(other.pk)).enabled
    # beat reads its schedule again, so it stops queuing the archived cluster's rounds; a round's
    # own save of its cluster leaves the schedule alone
    assert PeriodicTasks.last_change() > read
    read = PeriodicTasks.last_change()
    collect.apply(args=[other.pk])
    assert Cluster.objects.get(pk=other.pk).snapshot and PeriodicTasks.last_change() == read
    collect.apply(args=[collected.pk])  # a round queued before archiving finds nothing to do
    assert Cluster.objects.get(pk=collected.pk).snapshot == kept
    home = admin_client.get("/")
    assert home.context["cluster"] == other and [c.name for c in home.context["clusters"]] == ["other"]
    page = admin_client.get(reverse("dashboard:cluster", args=[collected.pk])).content.decode()
    assert "This cluster is archived" in page  # its history is still there to read
    event = AuditEvent.objects.get(action="cluster-changed")
    assert event.details["changes"] == {"archived": [False, True]}

    form = admin_form(collected)
    del form["archived"]
    admin_client.post(url, form)  # restored: rounds resume
    assert PeriodicTask.objects.get(name=schedule_name(collected.pk)).enabled


def test_settings_saved_while_archived_do_not_restart_rounds(admin_client, cluster):
    Cluster.objects.filter(pk=cluster.pk).update(archived=True)
    cluster.policy.save()
    assert not PeriodicTask.objects.get(name=schedule_name(cluster.pk)).enabled
