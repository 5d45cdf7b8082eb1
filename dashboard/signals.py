"""Keep each cluster's beat schedule, hold counter and stored snapshot in step with its settings.

Receivers rather than calls in the views, because settings are saved from the page,
the JSON API, the admin and the demo setup alike, and every path must do both.
"""

import json

from django.db.models.signals import post_delete, post_migrate, post_save
from django.dispatch import receiver
from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

from . import ha
from .models import CapacitySettings, Cluster, Policy
from .roles import ensure_roles


def schedule_name(cluster_id: int) -> str:
    return f"rounds of cluster {cluster_id}"


@receiver(post_save, sender=Cluster)
def give_new_cluster_settings(sender, instance: Cluster, created: bool, raw: bool = False, **kwargs) -> None:
    fields = kwargs.get("update_fields")
    if created and not raw:
        Policy.objects.get_or_create(cluster=instance)
    elif not raw and (fields is None or "archived" in fields):  # an archived cluster runs no rounds;
        # restoring it resumes them; a source changed collects on its queue. A save of other
        # fields (every collect's) leaves the schedule be.
        wanted = {"enabled": not instance.archived, **schedule_task(instance)}
        changed = PeriodicTask.objects.filter(name=schedule_name(instance.pk)).exclude(**wanted)
        if changed.update(**wanted):
            PeriodicTasks.update_changed()  # update() sends no signal: beat reads its schedule again


def schedule_task(cluster: Cluster) -> dict:
    """The task beat runs for the cluster, and its queue (Cluster.collect_task, collect_queue);
    `due`: skipped while the cluster's last collect still runs (tasks.collected_now)."""
    return {"task": cluster.collect_task, "queue": cluster.collect_queue, "kwargs": json.dumps({"due": True})}


@receiver(post_save, sender=Policy)
def apply_settings(sender, instance: Policy, raw: bool = False, **kwargs) -> None:
    """A settings change counts from the next round: the hold starts again, at the new interval."""
    if raw:
        return
    Cluster.objects.filter(pk=instance.cluster_id).update(hold_count=0)
    every, _ = IntervalSchedule.objects.get_or_create(every=instance.round_interval_s, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.update_or_create(
        name=schedule_name(instance.cluster_id),
        defaults={
            "interval": every,
            "args": json.dumps([instance.cluster_id]),
            "enabled": not Cluster.objects.filter(pk=instance.cluster_id, archived=True).exists(),
            # a collect still queued after one interval is dropped: the next one is fresher
            "expire_seconds": instance.round_interval_s,
            **schedule_task(instance.cluster),
        },
    )


@receiver(post_save, sender=CapacitySettings)
def standby_in_snapshot(sender, instance: CapacitySettings, created: bool, raw: bool = False, **kwargs) -> None:
    """A standby list saved (the capacity page, the API, a power-down): the stored snapshot says so
    at once, not at the next collect. A save that leaves `standby` out of its fields changed none."""
    fields = kwargs.get("update_fields")
    if raw or (created and not instance.standby) or (fields is not None and "standby" not in fields):
        return
    ha.refresh_snapshot(instance.cluster)


@receiver(post_delete, sender=Cluster)
def unschedule(sender, instance: Cluster, **kwargs) -> None:
    PeriodicTask.objects.filter(name=schedule_name(instance.pk)).delete()


@receiver(post_migrate)
def keep_roles(sender, app_config=None, **kwargs) -> None:
    # After this app's permissions exist (auth creates them in the same signal, earlier).
    if app_config is not None and app_config.name == "dashboard":
        ensure_roles()
