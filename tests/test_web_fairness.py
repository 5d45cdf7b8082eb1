"""One cluster cannot starve the others: a cluster's round is queued at most once and expires
after one round interval; what-if clusters' collects and rounds go to a queue of their own."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from dashboard import tasks
from dashboard.models import Cluster
from dashboard.signals import schedule_name

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    rounds = []
    monkeypatch.setattr(tasks.balancing_round, "apply_async", lambda args, **options: rounds.append((args, options)))
    return rounds


def test_a_clusters_round_is_queued_once_until_it_starts(cluster, queued):
    tasks.collect.apply(args=[cluster.pk])
    tasks.collect.apply(args=[cluster.pk])  # a backlog of collects (or a second beat)
    assert queued == [((cluster.pk,), {"queue": "celery", "expires": 10.0})]  # expires after one round interval
    tasks.balancing_round.apply(args=[cluster.pk])  # the round starts: the next collect may queue one
    tasks.collect.apply(args=[cluster.pk])
    assert len(queued) == 2


def test_the_schedule_expires_collects_after_one_round_interval(cluster):
    task = PeriodicTask.objects.get(name=schedule_name(cluster.pk))
    assert (task.expire_seconds, task.queue) == (10, "celery")


def test_what_if_clusters_collect_and_round_on_their_own_queue(admin_client, collected, queued):
    data = json.loads(admin_client.get(reverse("dashboard:export", args=[collected.pk])).content)
    upload = SimpleUploadedFile("lab.json", json.dumps(data).encode(), content_type="application/json")
    assert admin_client.post(reverse("dashboard:import"), {"name": "what-if", "snapshot": upload}).status_code == 302
    what_if = Cluster.objects.get(name="what-if")
    assert PeriodicTask.objects.get(name=schedule_name(what_if.pk)).queue == "whatif"
    tasks.collect.apply(args=[what_if.pk])
    assert queued[-1] == ((what_if.pk,), {"queue": "whatif", "expires": float(what_if.policy.round_interval_s)})
