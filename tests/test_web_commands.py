"""`make run`'s setup: idempotent demo cluster and admin, and the embedded mode's guard."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django_celery_beat.models import PeriodicTask

from dashboard.models import Cluster

pytestmark = pytest.mark.django_db


def test_demo_twice_reuses_cluster_and_admin(capsys):
    call_command("demo", password="")
    first = capsys.readouterr().out
    call_command("demo", password="")
    assert Cluster.objects.get().policy.mode == "dynamic"
    assert get_user_model().objects.filter(username="admin").count() == 1
    assert PeriodicTask.objects.get(task="dashboard.tasks.collect_and_round").interval.every == 5
    generated = first.split("login: admin / ")[1].strip()
    assert get_user_model().objects.get().check_password(generated)
    assert generated not in capsys.readouterr().out


def test_given_admin_password_is_set_on_every_run():
    call_command("demo", password="one")
    call_command("demo", password="two")
    assert get_user_model().objects.get(username="admin").check_password("two")


def test_embedded_mode_refuses_redis(settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    with pytest.raises(CommandError, match="REDIS_URL is set"):
        call_command("runembedded", port=0)
