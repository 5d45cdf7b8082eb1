"""Notifications through Apprise: per cluster, destinations (Apprise URLs) and the events each receives.

Apprise speaks to 100+ services with one URL syntax (json:// webhooks, mailto://, slack://,
msteams://, matrix://, ntfy://, gotify://…), so this module only decides what to say and
when. Sending is a Celery task queued after the deciding transaction commits, retried with
backoff: a slow or broken destination never holds up a round or a worker's migration.
"""

import logging
from functools import partial

import apprise
from celery import shared_task
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from .models import AuditEvent, Cluster, Migration, NotificationDestination

log = logging.getLogger(__name__)


class DeliveryFailed(Exception):
    """Apprise could not deliver; the message says why (from Apprise's own log)."""


def deliver(url: str, title: str, body: str) -> None:
    """Send one notification now, or raise DeliveryFailed with Apprise's reason."""
    sender = apprise.Apprise()
    if not sender.add(url):
        raise DeliveryFailed("Apprise does not recognise this URL")
    with apprise.LogCapture(level=logging.WARNING) as output:
        if not sender.notify(title=title, body=body):
            raise DeliveryFailed(output.getvalue().strip() or "Apprise could not deliver the notification")


@shared_task(
    ignore_result=True,
    autoretry_for=(DeliveryFailed,),
    retry_backoff=5,  # 5 s, 10 s, 20 s, … (with jitter), at most 10 minutes apart
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=8,
)
def send(destination_id: int, title: str, body: str) -> None:
    destination = NotificationDestination.objects.filter(pk=destination_id).first()
    if destination is None:
        return  # removed since the event
    deliver(destination.url, title, body)


def announce(cluster_id: int, event: str, title: str, body: str) -> None:
    """Queue the event for every destination of the cluster that wants it, once the transaction commits."""

    def queue():
        destinations = NotificationDestination.objects.filter(cluster_id=cluster_id)
        for pk, events in destinations.values_list("pk", "events"):
            if event in events:
                # robust: with the broker down the event is logged and lost, the round goes on
                send.delay(pk, title, body)

    transaction.on_commit(queue, robust=True)


@receiver(post_save, sender=AuditEvent)
def notify_of_event(sender, instance: AuditEvent, created: bool, raw: bool = False, **kwargs) -> None:
    """The audit trail already records every decision; the ones people want to hear about are sent on."""
    if not created or raw or instance.migration_id is None:
        return
    if instance.action == "failed":
        migration = Migration.objects.select_related("cluster").get(pk=instance.migration_id)
        if migration.plan is not None and (
            Migration.objects.filter(cluster_id=migration.cluster_id, plan=migration.plan, state="failed")
            .exclude(pk=migration.pk)
            .exists()
        ):
            return  # one message per plan: a dead target fails every step headed there, and the trail has them all
        announce(
            migration.cluster_id,
            "migration-failed",
            f"{migration.cluster}: migration of {migration.leader} failed",
            f"{migration.leader} {migration.source} → {migration.target}: {migration.reason or 'no reason given'}",
        )
    elif instance.action == "suggested" and instance.details.get("step", 0) == 0 and instance.migration_id is not None:
        # One notification per plan, not per step: its first step's event speaks for the plan.
        transaction.on_commit(partial(_recommendation_waiting, instance.migration_id), robust=True)


def _recommendation_waiting(migration_id: int) -> None:
    """After the round committed: the plan's steps still waiting for a person, in one message
    (those the round approved itself wait for nobody)."""
    first = Migration.objects.select_related("cluster").get(pk=migration_id)
    steps = Migration.objects.filter(cluster_id=first.cluster_id, state="suggested")
    steps = steps.filter(plan=first.plan).order_by("step") if first.plan is not None else steps.filter(pk=first.pk)
    waiting = list(steps)
    if not waiting:
        return
    lines = [
        f"{i}. Move {m.leader} {m.source} → {m.target}: imbalance {m.imbalance_before:.1%} → {m.imbalance_after:.1%}"
        f" (gain {m.relative_gain:.1%})"
        for i, m in enumerate(waiting, 1)
    ]
    plan = f"plan {first.plan}" if first.plan is not None else "a recommendation"
    total = f"Plan gain {first.plan_gain:.1%}, margin {first.margin:.1%}." if first.plan_gain is not None else ""
    announce(
        first.cluster_id,
        "recommendation-waiting",
        f"{first.cluster}: {plan} waits for approval ({len(waiting)} move{'s' if len(waiting) != 1 else ''})",
        "\n".join([*lines, total]).strip(),
    )


def source_unreachable(cluster_id: int, error: str) -> None:
    cluster = Cluster.objects.get(pk=cluster_id)
    announce(cluster_id, "source-unreachable", f"{cluster}: the source is unreachable", error)
