"""Migrations: recommended, approved, running and ended moves, and their one way between states."""

from datetime import timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

import crs.decision
import crs.migration
import crs.model
import crs.precedence
import crs.starts

from .audit import AuditEvent


class MigrationManager(models.Manager):
    # DESIGN.md "Migration states": the only transitions there are (the engine's table).
    TRANSITIONS = crs.migration.MIGRATION.transitions

    def transition(self, pk: int, old: str, new: str, actor, details: dict | None = None, **fields) -> bool:
        """True if this call made the change; False if someone else moved it on first.

        One conditional UPDATE, so two clicks or two admins never approve twice.
        """
        assert (old, new) in self.TRANSITIONS, (old, new)
        stamp = {
            "approved": "decided_at",
            "rejected": "decided_at",
            "expired": "decided_at",
            "running": "started_at",
            "done": "finished_at",
            "failed": "finished_at",
        }[new]
        fields.setdefault(stamp, timezone.now())
        if fields.get("reason"):
            details = {**(details or {}), "reason": fields["reason"]}  # the audit trail says why too
        with transaction.atomic():
            done = self.filter(pk=pk, state=old).update(state=new, **fields) == 1
            if done:
                cluster_id = self.filter(pk=pk).values_list("cluster_id", flat=True).get()
                AuditEvent.objects.create(
                    actor=actor, action=new, cluster_id=cluster_id, migration_id=pk, details=details or {}
                )
        return done


# A running migration not polled for this long lost its follower (its message was dropped by a
# broker or database outage, or its worker was killed): rounds and a starting worker follow it again.
UNFOLLOWED = timedelta(seconds=10)


def silent(now, after: timedelta = UNFOLLOWED) -> models.Q:
    """A running migration's follower is silent: nobody polled it for `after` since it started.
    Reconcile follows such a one again; the page offers "Mark failed" only for them."""
    return models.Q(followed_at__lte=now - after) | models.Q(followed_at__isnull=True, started_at__lte=now - after)


class Migration(models.Model):
    STATES = ["suggested", "approved", "running", "done", "failed", "rejected", "expired"]

    cluster = models.ForeignKey("Cluster", on_delete=models.CASCADE, related_name="migrations")
    state = models.CharField(max_length=10, choices=[(s, s) for s in STATES], default="suggested")
    leader = models.CharField(max_length=40, help_text="The guest the bundle is named after.")
    guests = models.JSONField(help_text="The whole bundle, leader first.")
    source = models.CharField(max_length=100)
    target = models.CharField(max_length=100)
    imbalance_before = models.FloatField()
    imbalance_after = models.FloatField()
    relative_gain = models.FloatField()
    margin = models.FloatField()  # fraction the gain was held against
    method = models.CharField(max_length=10)
    # A recommendation is one step of a round's plan: the plan's number (the round that
    # computed it), its index, the step it was computed behind, and the plan's total gain.
    plan = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    step = models.PositiveSmallIntegerField(default=0)
    after = models.PositiveSmallIntegerField(null=True, blank=True)
    plan_gain = models.FloatField(null=True, blank=True)
    alternatives = models.JSONField(default=list, blank=True, help_text="Next-best targets, best first.")
    downtime_s = models.FloatField(
        null=True, blank=True, help_text="Seconds of downtime: a container moves by a restart (estimate); null = live."
    )
    priority = models.PositiveSmallIntegerField(default=5, help_text="1 mandatory … 5 slight gain, as DRS grades.")
    automatic = models.BooleanField(default=False, help_text="Approved by the round, not a person.")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    reason = models.TextField(
        blank=True, help_text="Why it was rejected, expired or failed, or why an approved one waits to start."
    )
    task_ids = models.JSONField(default=list, blank=True)
    progress = models.FloatField(default=0.0)
    suggested_at = models.DateTimeField(default=timezone.now)  # entered `suggested`: the recommendation's time
    decided_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When a follower last polled it (tasks.follow); a running migration not polled for a while
    # lost its follower to an outage and is followed again (tasks.reconcile).
    followed_at = models.DateTimeField(null=True, blank=True, editable=False)
    # What the move is for, in precedence order (crs.precedence): evacuation and failback
    # (maintenance), rule fix, pressure relief, balancing; and why, when it is owed.
    kind = models.CharField(
        max_length=15, choices=[(k, k) for k in crs.precedence.KINDS], default="balancing", db_index=True
    )
    explanation = models.TextField(blank=True, help_text="Why the move is owed: the maintenance or the rule it fixes.")
    # Its outcome (outcomes.py): the imbalance the rounds measured 5 minutes and 1 hour after it
    # finished, beside `imbalance_after`, the prediction. Null until then, and for moves not done.
    observed_5m = models.FloatField(
        null=True, blank=True, editable=False, help_text="Imbalance measured 5 minutes after it finished."
    )
    observed_1h = models.FloatField(
        null=True, blank=True, editable=False, help_text="Imbalance measured 1 hour after it finished."
    )
    # Whether it paid (crs.paid, judged by outcomes.py once its horizon passed): null until judged,
    # and for moves that are owed rather than chosen (evacuation, failback, rule fix).
    paid = models.BooleanField(
        null=True, blank=True, editable=False, help_text="It paid over its horizon (crs.paid); null: not judged."
    )
    paid_figures = models.JSONField(
        null=True, blank=True, editable=False, help_text="What the verdict was judged on (crs.paid.Verdict)."
    )
    # What the move was expected to pay when the round recommended it (crs.payoff): its gain against
    # its cost, each in its objective's unit, as `crs plan --json` names them (Payoff.to_dict).
    # Null for owed moves and under the `proxmox` preset, where no move has to pay.
    payoff = models.JSONField(
        null=True, blank=True, editable=False, help_text="Its expected gain against its cost (crs.payoff)."
    )

    objects = MigrationManager()

    class Meta:
        ordering = ["-suggested_at", "-pk"]
        permissions = [("approve_migration", "Can approve or reject recommended migrations")]
        indexes = [models.Index(fields=["cluster", "state"])]

    def __str__(self) -> str:
        return f"{self.leader} {self.source} → {self.target} ({self.state})"

    @property
    def silent_from(self):
        """When this running migration counts as silent unless polled again (None when not running)."""
        if self.state != "running" or not (heard := self.followed_at or self.started_at):
            return None
        return heard + UNFOLLOWED

    def as_move(self) -> crs.decision.Move:
        return crs.decision.Move(
            self.leader, tuple(self.guests), self.source, self.target, self.imbalance_after, self.relative_gain
        )

    def behind(self) -> list["Migration"]:
        """The steps of its plan it was computed behind, first first (approving it approves them)."""
        if self.plan is None:
            return []
        steps = {m.step: m for m in self.cluster.migrations.filter(plan=self.plan)}
        chain, at = [], self.after
        while at is not None and at in steps:
            chain.append(steps[at])
            at = steps[at].after
        return chain[::-1]

    def dependents(self) -> list["Migration"]:
        """The steps of its plan computed behind it, directly or not, in plan order."""
        if self.plan is None:
            return []
        steps = list(self.cluster.migrations.filter(plan=self.plan).order_by("step"))
        behind, out = {self.step}, []
        for m in steps:
            if m.after in behind:
                behind.add(m.step)
                out.append(m)
        return out

    def stale_reason(self, snapshot: crs.model.Snapshot | None) -> str:
        """Why `snapshot` makes this move illegal or unwise; "" if it fits (or there is none yet).

        The engine decides (crs.starts.stale_reason), under the cluster's current settings
        and guards (cooldown, way back, rejection memory).
        """
        if snapshot is None:
            return ""
        guards = crs.model.Guards() if crs.starts.unguarded(self.kind) else self.cluster.guards()
        return crs.starts.stale_reason(self.cluster.under_policy(snapshot), self.as_move(), self.kind, guards)
