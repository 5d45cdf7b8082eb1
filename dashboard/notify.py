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

import crs.episodes

from . import events
from .models import AuditEvent, Cluster, Migration, NotificationDestination, Round

# The states a migration ends in: a plan whose steps are all in one of them has finished.
ENDED = ("done", "failed", "rejected", "expired")

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


def send_test(destination: NotificationDestination, user) -> None:
    """Deliver a test message now (not queued), so that whoever asked sees at once whether the
    destination works; raises DeliveryFailed with the reason. The API's and the admin's action."""
    deliver(destination.url, f"{destination.cluster}: test notification", f"Sent by {user} from crs.")


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
        for pk, wanted in destinations.values_list("pk", "events"):
            if event in wanted:
                send.delay(pk, title, body)

    # robust: with the broker down the event is logged and lost, the round goes on
    transaction.on_commit(queue, robust=True)


@receiver(post_save, sender=AuditEvent)
def notify_of_event(sender, instance: AuditEvent, created: bool, raw: bool = False, **kwargs) -> None:
    """The audit trail already records every decision; the ones people want to hear about are sent on."""
    if not created or raw:
        return
    if instance.action == "plan-finished":
        _plan_finished(instance)
    migration_id = instance.migration_id
    if migration_id is None:
        return
    if instance.action in ENDED:
        # After commit, so that two steps ending at once both see each other ended (plan_ended locks).
        transaction.on_commit(partial(plan_ended, migration_id), robust=True)
    if instance.action == "failed":
        migration = Migration.objects.select_related("cluster").get(pk=migration_id)
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


def plan_ended(migration_id: int) -> None:
    """When `migration_id` was its plan's last open step and the plan moved something: the trail
    records "plan-finished" once (under the cluster's row lock: of two steps ending at once, one
    records it), and the destinations that chose it hear of it after that commits."""
    migration = Migration.objects.filter(pk=migration_id).values("cluster_id", "plan").first()
    if migration is None or migration["plan"] is None:
        return
    cluster_id, plan = migration["cluster_id"], migration["plan"]
    with transaction.atomic():
        Cluster.objects.select_for_update().filter(pk=cluster_id).values_list("pk").get()
        steps = list(Migration.objects.filter(cluster_id=cluster_id, plan=plan).values_list("state", flat=True))
        if any(state not in ENDED for state in steps) or not {"done", "failed"} & set(steps):
            return  # still running, or nothing of it ever ran (all rejected or expired): not "finished"
        if AuditEvent.objects.filter(cluster_id=cluster_id, action="plan-finished", details__plan=plan).exists():
            return
        counts = {state: steps.count(state) for state in ENDED if state in steps}
        AuditEvent.objects.create(
            actor=None, action="plan-finished", cluster_id=cluster_id, details={"plan": plan, **counts}
        )


def _plan_finished(event: AuditEvent) -> None:
    details, cluster_id = event.details, event.cluster_id
    assert cluster_id is not None  # a plan is always a cluster's
    steps = Migration.objects.filter(cluster_id=cluster_id, plan=details["plan"]).order_by("step")
    others = ", ".join(f"{details[s]} {s}" for s in ("rejected", "expired") if details.get(s))
    lines = [f"{m.step + 1}. {m.leader} {m.source} → {m.target}: {m.state}" for m in steps]
    announce(
        cluster_id,
        "plan-finished",
        f"{event.cluster}: plan {details['plan']} finished: {details.get('done', 0)} done, "
        f"{details.get('failed', 0)} failed{f', {others}' if others else ''}",
        "\n".join(lines),
    )


@receiver(events.round_recorded)
def imbalance_measured(sender, round_: Round, **kwargs) -> None:
    """After every round: tracks the episode of rounds above the threshold, and tells each
    destination due (crs.episodes decides) once per episode. Conditional UPDATEs: a repeated
    call sends nothing twice, and the episode's start is the first round's that stored it."""
    cluster_id = round_.cluster_id
    if not crs.episodes.above(round_.imbalance, round_.threshold):
        Cluster.objects.filter(pk=cluster_id, above_threshold_since__isnull=False).update(above_threshold_since=None)
        return
    Cluster.objects.filter(pk=cluster_id, above_threshold_since__isnull=True).update(above_threshold_since=round_.at)
    since = Cluster.objects.values_list("above_threshold_since", flat=True).get(pk=cluster_id)
    assert since is not None  # set just above, or by an earlier round of the episode
    rows = NotificationDestination.objects.filter(cluster_id=cluster_id)
    destinations = tuple(
        crs.episodes.Destination(pk, "imbalance-above" in wanted, after, told)
        for pk, wanted, after, told in rows.values_list("pk", "events", "imbalance_for", "imbalance_sent_for")
    )
    notice = crs.episodes.notice(
        str(round_.cluster), round_.imbalance, round_.threshold, since, round_.at, destinations
    )
    for pk in notice.due:
        if (
            NotificationDestination.objects.filter(pk=pk)
            .exclude(imbalance_sent_for=since)
            .update(imbalance_sent_for=since)
        ):
            transaction.on_commit(partial(send.delay, pk, notice.title, notice.body), robust=True)


@receiver(events.n1_turned_bad)
def n1_turned_bad(sender, cluster: Cluster, verdict: dict, **kwargs) -> None:
    """The N+1 verdict went from good to bad (n1.refresh decides that once, with a conditional UPDATE)."""
    failing = [loss["summary"] for loss in verdict["losses"] if not loss["survived"]]
    announce(
        cluster.pk,
        "n1-bad",
        f"{cluster}: N+1 turned bad: {verdict['verdict']}",
        "\n".join(["The cluster no longer survives the loss of any one node.", *failing]),
    )
