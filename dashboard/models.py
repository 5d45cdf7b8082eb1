"""Clusters, their balancing settings, round samples, migrations and the audit trail.

Percentages are stored as the admin types them (0–100); `Policy.engine_settings()` is
the one place they become the engine's fractions.
"""

from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction
from django.utils import timezone

import crs.balancer
import crs.decision
import crs.model
import crs.snapshot
import crs.sources

MODE_CHOICES = [(m, m) for m in crs.model.MODES]
METHOD_CHOICES = [(m, m) for m in crs.model.METHODS]
SCALE_CHOICES = [(s, s) for s in crs.model.SCALES]
SOURCE_CHOICES = [(kind, kind) for kind in crs.sources.KINDS]


def percent_validators(field: str) -> list:
    message = f"{field} must be between 0 and 100 %%"  # %% : Django formats messages with %
    return [MinValueValidator(0, message=message), MaxValueValidator(100, message=message)]


class ClusterManager(models.Manager):
    ROUND_LEASE = timedelta(seconds=120)

    def claim_round(self, pk: int) -> bool:
        """True if this caller may run the cluster's round now; two rounds never overlap.

        A lease rather than a lock held open: a worker that dies mid-round blocks the
        cluster for at most ROUND_LEASE, and no transaction spans the engine call.
        """
        now = timezone.now()
        free = models.Q(round_lease_until__isnull=True) | models.Q(round_lease_until__lt=now)
        return self.filter(free, pk=pk).update(round_lease_until=now + self.ROUND_LEASE) == 1

    def release_round(self, pk: int) -> None:
        self.filter(pk=pk).update(round_lease_until=None)


class Cluster(models.Model):
    name = models.CharField(max_length=100, unique=True)
    source_kind = models.CharField(max_length=20, choices=SOURCE_CHOICES, default="simulator")
    source_config = models.JSONField(default=dict, blank=True, help_text="Options for the source adapter.")
    # What the adapter asked us to keep between calls (the simulator's clock and placements).
    source_state = models.JSONField(default=dict, blank=True, editable=False)
    snapshot = models.JSONField(null=True, blank=True, editable=False, help_text="Latest crs-snapshot/1.")
    collected_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Why the last collection was refused (cluster unreachable, bad data); empty once one works.
    source_error = models.TextField(blank=True, editable=False)
    source_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    hold_count = models.PositiveIntegerField(default=0, editable=False)
    last_round_at = models.DateTimeField(null=True, blank=True, editable=False)
    round_lease_until = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ClusterManager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def read_only(self) -> bool:
        """An imported snapshot: rounds and plans run on it, but nothing can be migrated."""
        return self.source_kind == "snapshot"


class Policy(models.Model):
    """How one cluster is balanced. Defaults are Proxmox's; automation defaults to manual."""

    AUTOMATION_CHOICES = [
        ("manual", "manual: every suggestion waits for approval"),
        ("partial", "partial: automatic when the gain reaches the automatic margin"),
        ("automatic", "automatic (auto-rebalance on): rounds approve their own suggestions"),
    ]

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="policy")
    mode = models.CharField(max_length=10, choices=MODE_CHOICES, default="static",
                            help_text="How load is measured: guest count, configured size, or measured usage.")
    automation = models.CharField(max_length=10, choices=AUTOMATION_CHOICES, default="manual")
    threshold = models.FloatField(default=30.0, validators=percent_validators("threshold"),
                                  help_text="Imbalance (%) above which a round looks for a migration.")
    hold_duration = models.IntegerField(
        default=3, validators=[MinValueValidator(0, message="hold duration must be 0 or more rounds")],
        help_text="Rounds the imbalance must stay above the threshold before a suggestion.")
    margin = models.FloatField(default=10.0, validators=percent_validators("margin"),
                               help_text="Minimum relative gain (%) of the imbalance for a suggestion.")
    automatic_margin = models.FloatField(
        default=25.0, validators=percent_validators("automatic margin"),
        help_text="Partial automation: suggestions gaining at least this much (%) approve themselves.")
    method = models.CharField(max_length=10, choices=METHOD_CHOICES, default="bruteforce")
    imbalance_scale = models.CharField(max_length=10, choices=SCALE_CHOICES, default="normalized")
    round_interval = models.IntegerField(
        default=10, validators=[MinValueValidator(1, message="round interval must be at least 1 second")],
        help_text="Seconds between rounds.")

    class Meta:
        verbose_name = "settings"
        verbose_name_plural = "settings"

    def __str__(self) -> str:
        return f"settings of {self.cluster}"

    def clean(self) -> None:
        if self.automatic_margin is not None and self.margin is not None and self.automatic_margin < self.margin:
            raise ValidationError({"automatic_margin": "automatic margin must be at least the margin"})

    @property
    def auto_rebalance(self) -> bool:
        return self.automation == "automatic"

    def engine_settings(self) -> crs.model.Settings:
        """The one bridge from the admin's units (percent, automation level) to the engine's."""
        return crs.model.Settings(
            mode=self.mode,
            auto_rebalance=self.auto_rebalance,
            threshold=self.threshold / 100.0,
            hold_duration=self.hold_duration,
            margin=self.margin / 100.0,
            method=self.method,
            imbalance_scale=self.imbalance_scale,
        )

    def approves_itself(self, relative_gain: float) -> bool:
        """Whether a new suggestion with this gain is approved by the round, not a person."""
        if self.automation == "automatic":
            return True
        return self.automation == "partial" and relative_gain >= self.automatic_margin / 100.0


class Round(models.Model):
    """One balancing round's outcome: a point of the imbalance trend and the round status."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="rounds")
    at = models.DateTimeField(db_index=True)
    imbalance = models.FloatField()  # fraction, engine scale
    threshold = models.FloatField()  # fraction, as it was for this round
    decision = models.CharField(max_length=20)
    hold_count = models.IntegerField()
    explanation = models.JSONField()
    node_usage = models.JSONField()  # {node: {"cpu": fraction, "memory": fraction, "load": fraction}}

    class Meta:
        indexes = [models.Index(fields=["cluster", "at"])]
        ordering = ["at"]


class MigrationManager(models.Manager):
    # DESIGN.md "Migration states": the only transitions there are.
    TRANSITIONS = frozenset({
        ("suggested", "approved"), ("suggested", "rejected"), ("suggested", "expired"),
        ("approved", "running"), ("running", "done"), ("running", "failed"),
    })

    def transition(self, pk: int, old: str, new: str, actor, details: dict | None = None, **fields) -> bool:
        """True if this call made the change; False if someone else moved it on first.

        One conditional UPDATE, so two clicks or two admins never approve twice.
        """
        assert (old, new) in self.TRANSITIONS, (old, new)
        stamp = {"approved": "decided_at", "rejected": "decided_at", "expired": "decided_at",
                 "running": "started_at", "done": "finished_at", "failed": "finished_at"}[new]
        fields.setdefault(stamp, timezone.now())
        with transaction.atomic():
            done = self.filter(pk=pk, state=old).update(state=new, **fields) == 1
            if done:
                cluster_id = self.filter(pk=pk).values_list("cluster_id", flat=True).get()
                AuditEvent.objects.create(actor=actor, action=new, cluster_id=cluster_id,
                                          migration_id=pk, details=details or {})
        return done


class Migration(models.Model):
    STATES = ["suggested", "approved", "running", "done", "failed", "rejected", "expired"]
    OPEN_STATES = ["suggested", "approved", "running"]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="migrations")
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
    automatic = models.BooleanField(default=False, help_text="Approved by the round, not a person.")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    reason = models.TextField(blank=True, help_text="Why it was rejected, expired or failed.")
    task_ids = models.JSONField(default=list, blank=True)
    progress = models.FloatField(default=0.0)
    suggested_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = MigrationManager()

    class Meta:
        ordering = ["-suggested_at", "-pk"]
        permissions = [("approve_migration", "Can approve or reject suggested migrations")]
        indexes = [models.Index(fields=["cluster", "state"])]

    def __str__(self) -> str:
        return f"{self.leader} {self.source} → {self.target} ({self.state})"

    def stale_reason(self, snapshot: dict | None) -> str:
        """Why the latest snapshot (crs-snapshot/1) makes this move illegal or pointless; "" if it fits.

        The engine decides (crs.balancer.stale_reason), under the cluster's current settings.
        """
        if snapshot is None:
            return ""
        move = crs.decision.Move(self.leader, tuple(self.guests), self.source, self.target,
                                 self.imbalance_after, self.relative_gain)
        current = crs.snapshot.parse(snapshot).with_settings(self.cluster.policy.engine_settings())
        return crs.balancer.stale_reason(current, move) or ""


class AuditEvent(models.Model):
    """Who did what, when. `actor` None means the system did it (a round, a worker)."""

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=30)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="audit_events")
    migration = models.ForeignKey(Migration, null=True, blank=True, on_delete=models.CASCADE)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor or 'system'} {self.action}"
