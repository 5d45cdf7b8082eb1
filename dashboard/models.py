"""Clusters, their balancing settings, round samples, migrations and the audit trail.

One unit per concept: fractions (0–1) and durations, as the engine and the JSON API
read them. `Policy.engine_settings()` is the one bridge to the engine.
"""

from datetime import datetime, timedelta
from typing import cast
from zoneinfo import available_timezones

import apprise
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models, transaction
from django.utils import timezone

import crs.balancer
import crs.decision
import crs.guards
import crs.mandatory
import crs.model
import crs.precedence
import crs.snapshot
import crs.sources

MODE_CHOICES = [(m, m) for m in crs.model.MODES]
METHOD_CHOICES = [(m, m) for m in crs.model.METHODS]
SCALE_CHOICES = [(s, s) for s in crs.model.SCALES]
SOURCE_CHOICES = [(kind, kind) for kind in crs.sources.KINDS]
# The zones this machine's tz database knows; a form's choices, never a field's (they differ by machine).
TIME_ZONE_CHOICES = [(zone, zone) for zone in sorted(available_timezones())]


def known_time_zone(value: str) -> None:
    if value not in available_timezones():
        raise ValidationError("time zone must be an IANA zone name, e.g. Europe/Berlin or UTC")


MAX_MEMORY_RESERVE = 2**40  # bytes per node (1 TiB)


def fraction_validators(field: str) -> list:
    message = f"{field} must be between 0 and 1"
    return [MinValueValidator(0, message=message), MaxValueValidator(1, message=message)]


def duration_validators(field: str, low: timedelta, high: timedelta) -> list:
    message = f"{field} must be between {low.total_seconds():g} and {high.total_seconds():g} seconds"
    return [MinValueValidator(low, message=message), MaxValueValidator(high, message=message)]


def whole_number_validators(field: str, low: int, high: int, unit: str) -> list:
    message = f"{field} must be between {low} and {high} {unit}".rstrip()
    return [MinValueValidator(low, message=message), MaxValueValidator(high, message=message)]


def with_cluster(queryset: models.QuerySet, *related: str) -> models.QuerySet:
    """Rows with their cluster joined (`select_related`), but not the cluster's stored snapshot and
    N+1 verdict: a list shows the cluster's name, and the join decodes those once per row (at
    1000 nodes megabytes each; ClusterManager's own `defer` does not reach a join). A row that
    does need them loads them on first access."""
    return queryset.select_related("cluster", *related).defer("cluster__snapshot", "cluster__n1")


class ClusterManager(models.Manager):
    # Longer than the longest round seen (1000 nodes × 20 000 guests when rounds still computed
    # the minute's N+1 and the hour's capacity counts: about 15 s on a loaded machine); short
    # enough that a worker killed mid-round stops its cluster's rounds for a minute at most.
    ROUND_LEASE = timedelta(seconds=60)

    def get_queryset(self) -> models.QuerySet:
        """Rows without the stored N+1 verdict: only the pages and the API that show it read it,
        and it grows with what goes wrong (a loss per node, with its overloaded nodes and up to
        ha.EXAMPLES guests: 10.8 kB at 1000 nodes when every loss is survived, far more when
        many fail). They still get it as before: Django loads a deferred field on first
        access, with one query."""
        return super().get_queryset().defer("n1")

    def claim_round(self, pk: int) -> bool:
        """True if this caller may run the cluster's round now; two rounds never overlap.

        A lease rather than a lock held open: a worker that dies mid-round blocks the
        cluster for at most ROUND_LEASE, and no transaction spans the engine call.
        """
        return self.lease(pk, "round_lease_until", self.ROUND_LEASE)

    def release_round(self, pk: int) -> None:
        self.release(pk, "round_lease_until")

    def queue_round(self, pk: int, interval: timedelta) -> bool:
        """True if the caller may queue the cluster's round: none is queued. The mark lapses after
        one round interval, as the queued message does (it expires), so a lost one blocks nothing."""
        return self.lease(pk, "round_queued_until", interval)

    def lease(self, pk: int, field: str, length: timedelta) -> bool:
        """True if the caller took the cluster's `field` lease for `length`: it was free (never
        taken, released, or lapsed). One conditional UPDATE, so of two callers one wins, and a
        lease its holder never releases (a worker killed, a message lost) lapses by itself."""
        now = timezone.now()
        free = models.Q(**{f"{field}__isnull": True}) | models.Q(**{f"{field}__lt": now})
        return self.filter(free, pk=pk).update(**{field: now + length}) == 1

    def release(self, pk: int, field: str) -> None:
        self.filter(pk=pk).update(**{field: None})


# A name goes into file names and headers (the snapshot download): no line breaks or other
# control characters.
printable_name = RegexValidator(
    r"\A[^\x00-\x1f\x7f]+\Z", "name must not contain line breaks, tabs or other control characters"
)


class Cluster(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[printable_name])
    source_kind = models.CharField(max_length=20, choices=SOURCE_CHOICES, default="simulator")
    source_config = models.JSONField(default=dict, blank=True, help_text="Options for the source adapter.")
    # What the adapter asked us to keep between calls (the simulator's clock and placements).
    source_state = models.JSONField(default=dict, blank=True, editable=False)
    snapshot = models.JSONField(null=True, blank=True, editable=False, help_text="Latest crs-snapshot/1.")
    collected_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Why the last collection was refused (cluster unreachable, bad data); empty once one works.
    source_error = models.TextField(blank=True, editable=False)
    source_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Clusters with a history are never deleted (the audit trail keeps its subject); retiring one
    # archives it: no more rounds, gone from the page's list, history and trail kept.
    archived = models.BooleanField(default=False, help_text="No rounds, hidden from the page; history is kept.")
    hold_count = models.PositiveIntegerField(default=0, editable=False)
    pressure_gate = models.JSONField(default=dict, editable=False)  # crs.gating's round state
    # Emergency stop: automation paused, nothing approved starts; undone by a second click.
    stopped = models.BooleanField(default=False, editable=False)
    last_round_at = models.DateTimeField(null=True, blank=True, editable=False)
    round_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    # A round is queued and not yet started (ClusterManager.queue_round): never two in the queue.
    round_queued_until = models.DateTimeField(null=True, blank=True, editable=False)
    # A capacity count or an N+1 refresh queued or running beside the rounds (tasks.queue_beside):
    # a round queues no second one meanwhile.
    capacity_queued_until = models.DateTimeField(null=True, blank=True, editable=False)
    n1_queued_until = models.DateTimeField(null=True, blank=True, editable=False)
    # The last N+1 verdict (dashboard/ha.py, crs.n1) and when it was computed: a task the rounds
    # queue (tasks.n1_refresh) recomputes it on a slower cadence than theirs, since it places
    # every HA guest once per node.
    n1 = models.JSONField(null=True, blank=True, editable=False)
    n1_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Proxmox's own balancer (crs.coexistence.ProxmoxBalancer) as the last collect read it; None
    # for other sources. While it rebalances by itself, automation here is held (windows.py).
    proxmox_balancer = models.JSONField(null=True, blank=True, editable=False)
    # Since when every round measured the imbalance above the threshold (None: the last one did
    # not): the "imbalance above the threshold for longer than …" notification's episode.
    above_threshold_since = models.DateTimeField(null=True, blank=True, editable=False)

    objects = ClusterManager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def effective_source_config(self) -> dict:
        """`source_config` as the adapter gets it: the cluster's own options over the site's
        Proxmox defaults (read from the environment in settings.py, so an API token need not
        be stored)."""
        period = {"usage_period": self.policy.usage_period} if hasattr(self, "policy") else {}
        if self.is_proxmox:
            return {**settings.CRS_PVE_DEFAULTS, **self.source_config, **period}
        if self.source_kind == "simulator":
            return {**self.source_config, **period}
        return self.source_config

    def clean(self) -> None:
        """Refuse a source config the adapter would refuse, naming the key, before it is stored."""
        try:
            crs.sources.open_source(self.source_kind, self.effective_source_config())
        except crs.sources.ConfigError as exc:
            raise ValidationError({"source_config": str(exc)}) from exc

    def guards(self) -> crs.model.Guards:
        """The engine's anti-thrashing sets (crs.guards), from this cluster's migration history.

        One place for rounds, approvals and executions alike, so what the page recommends and
        what a worker agrees to run never disagree.
        """
        policy = self.policy
        now = timezone.now()
        since = now - max(policy.cooldown, policy.rejection_memory)
        recent = self.migrations.filter(
            models.Q(state__in=["done", "failed"], finished_at__gte=since)
            | models.Q(state="rejected", decided_at__gte=since)
        ).only("guests", "source", "target", "state", "finished_at", "decided_at")
        history = [
            crs.guards.PastMove(
                tuple(m.guests), m.source, m.target, m.state, cast(datetime, m.finished_at or m.decided_at).timestamp()
            )
            for m in recent
        ]
        return crs.guards.guards_from(
            history, now.timestamp(), policy.cooldown.total_seconds(), policy.rejection_memory.total_seconds()
        )

    def under_policy(self, snapshot: crs.model.Snapshot) -> crs.model.Snapshot:
        """`snapshot` judged by this cluster's current settings, not the ones it was taken with."""
        return snapshot.with_settings(self.policy.engine_settings())

    def latest_snapshot(self) -> crs.model.Snapshot | None:
        """The last collected snapshot under the current settings; None before the first collection."""
        return None if self.snapshot is None else self.under_policy(crs.snapshot.parse(self.snapshot))

    @property
    def read_only(self) -> bool:
        """An imported snapshot: rounds and plans run on it, but nothing can be migrated."""
        return self.source_kind == "snapshot"

    @property
    def is_proxmox(self) -> bool:
        """A real Proxmox cluster: Proxmox keeps its HA rules and maintenance and runs its own
        commands (shutdowns, maintenance mode); the product only reads and migrates."""
        return self.source_kind == "proxmox"


class Policy(models.Model):
    """How one cluster is balanced. Defaults are Proxmox's; automation defaults to manual.

    Stored in one unit per concept, the engine's and the API's: fractions (0–1) and
    durations. Percent and minutes exist only on the page (forms.py, dashboard.js).
    """

    AUTOMATION_CHOICES = [
        ("manual", "manual: every recommendation waits for approval"),
        ("partial", "partial: automatic when the gain reaches the automatic margin"),
        ("automatic", "automatic (auto-rebalance on): rounds approve their own recommendations"),
    ]
    OBJECTIVE_CHOICES = [
        ("even", "even: spread the load evenly"),
        ("pressure", "pressure: relieve nodes short of CPU or memory"),
        ("both", "both: relieve pressure first, then spread evenly"),
    ]
    CONTAINER_CHOICES = [
        ("never", "never move (no downtime)"),
        ("restart", "move with a restart (downtime)"),
    ]
    PRESET_CHOICES = [
        ("proxmox", "proxmox: Proxmox's exact behaviour, one move per round"),
        ("product", "product: plans of several moves down to a target, no move that overfills a node"),
    ]
    # What a preset sets when an admin switches to it: the engine's values of that preset.
    PRESET_SETTINGS = ("moves_per_round", "target_imbalance", "load_floor", "usage_period", "containers")
    FRACTIONS = ("threshold", "margin", "automatic_margin", "target_imbalance", "load_floor")

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="policy")
    preset = models.CharField(
        max_length=10,
        choices=PRESET_CHOICES,
        default="product",
        help_text="proxmox: decisions as Proxmox makes them; product: this product's plans.",
    )
    mode = models.CharField(
        max_length=10,
        choices=MODE_CHOICES,
        default="static",
        help_text="How load is measured: guest count, configured size, or measured usage.",
    )
    automation = models.CharField(max_length=10, choices=AUTOMATION_CHOICES, default="manual")
    threshold = models.FloatField(
        default=0.3,
        validators=fraction_validators("threshold"),
        help_text="Imbalance above which a round looks for a migration.",
    )
    hold_duration = models.IntegerField(
        default=3,
        validators=whole_number_validators("hold duration", 0, 1000, "rounds"),
        help_text="Rounds the imbalance must stay above the threshold before a recommendation.",
    )
    margin = models.FloatField(
        default=0.1,
        validators=fraction_validators("margin"),
        help_text="Minimum relative gain of the imbalance for a recommendation.",
    )
    automatic_margin = models.FloatField(
        default=0.25,
        validators=fraction_validators("automatic margin"),
        help_text="Partial automation: recommendations gaining at least this much approve themselves.",
    )
    method = models.CharField(max_length=10, choices=METHOD_CHOICES, default="bruteforce")
    imbalance_scale = models.CharField(max_length=10, choices=SCALE_CHOICES, default="normalized")
    round_interval = models.IntegerField(
        default=10,
        validators=whole_number_validators("round interval", 1, 86400, "seconds"),
        help_text="Seconds between rounds.",
    )
    cooldown = models.DurationField(
        default=timedelta(minutes=30),
        validators=duration_validators("cooldown", timedelta(0), timedelta(days=7)),
        help_text="How long a guest stays put after a migration; it is not moved back meanwhile either.",
    )
    rejection_memory = models.DurationField(
        default=timedelta(minutes=60),
        validators=duration_validators("rejection memory", timedelta(0), timedelta(days=7)),
        help_text="How long a rejected guest → node move is not recommended again.",
    )
    recommendation_expiry = models.DurationField(
        default=timedelta(minutes=15),
        validators=duration_validators("recommendation expiry", timedelta(minutes=1), timedelta(days=7)),
        help_text="How long a recommendation waits for a decision before it expires.",
    )
    max_concurrent_migrations = models.IntegerField(
        default=1,
        validators=whole_number_validators("concurrent migrations", 1, 100, ""),
        help_text="Migrations of this cluster that may run at once (1, like Proxmox).",
    )
    moves_per_round = models.IntegerField(
        default=5,
        validators=whole_number_validators("moves per round", 1, 50, ""),
        help_text="Migrations one round may recommend at most.",
    )
    target_imbalance = models.FloatField(
        default=crs.model.PRODUCT.target_imbalance,
        null=True,
        blank=True,
        validators=fraction_validators("target imbalance"),
        help_text="Imbalance a round's moves aim for, at most the threshold; empty = the threshold.",
    )
    load_floor = models.FloatField(
        default=0.0,
        validators=fraction_validators("load floor"),
        help_text="Below this load on every node the cluster counts as balanced.",
    )
    cpu_overcommit = models.FloatField(
        default=4.0,
        validators=[
            MinValueValidator(1, message="cpu overcommit must be between 1 and 64"),
            MaxValueValidator(64, message="cpu overcommit must be between 1 and 64"),
        ],
        help_text="Configured cores a node may carry per CPU thread.",
    )
    memory_reserve = models.PositiveBigIntegerField(
        default=0,
        validators=whole_number_validators("memory reserve", 0, MAX_MEMORY_RESERVE, "bytes"),
        help_text="Memory per node kept free of guests (bytes).",
    )
    max_migrations_per_node = models.IntegerField(
        default=1,
        validators=whole_number_validators("max migrations per node", 1, 16, ""),
        help_text="Migrations one node may take part in at once.",
    )
    objective = models.CharField(max_length=10, choices=OBJECTIVE_CHOICES, default="even")
    usage_period = models.IntegerField(
        default=int(crs.model.PRODUCT.usage_period),
        validators=whole_number_validators("usage period", 0, 86400, "seconds"),
        help_text="Seconds of the source's clock over which usage is averaged; 0 = the latest value.",
    )
    containers = models.CharField(
        max_length=10,
        choices=CONTAINER_CHOICES,
        default=crs.model.PRODUCT.containers,
        help_text="A container cannot live-migrate: its move is a restart, with downtime.",
    )
    time_zone = models.CharField(
        max_length=64,
        validators=[known_time_zone],
        default="UTC",
        help_text="The zone change windows are written in (an IANA name, e.g. Europe/Berlin).",
    )

    class Meta:
        verbose_name = "settings"
        verbose_name_plural = "settings"

    def __str__(self) -> str:
        return f"settings of {self.cluster}"

    def clean(self) -> None:
        if self.automatic_margin is not None and self.margin is not None and self.automatic_margin < self.margin:
            raise ValidationError({"automatic_margin": "automatic margin must be at least the margin"})
        if self.target_imbalance is not None and self.threshold is not None and self.target_imbalance > self.threshold:
            raise ValidationError({"target_imbalance": "target imbalance must be at most the threshold"})

    @property
    def auto_rebalance(self) -> bool:
        return self.automation == "automatic"

    def engine_settings(self) -> crs.model.Settings:
        """The one bridge from the stored settings (and the automation level) to the engine's.

        Every engine setting is passed; `max_migrations_per_node` is the executor's alone (tasks.py).
        The fields' choices are the engine's values, so the casts only tell the type checker.
        """
        return crs.model.Settings(
            mode=cast(crs.model.Mode, self.mode),
            auto_rebalance=self.auto_rebalance,
            threshold=self.threshold,
            hold_duration=self.hold_duration,
            margin=self.margin,
            method=cast(crs.model.Method, self.method),
            imbalance_scale=cast(crs.model.Scale, self.imbalance_scale),
            preset=cast(crs.model.Preset, self.preset),
            moves_per_round=self.moves_per_round,
            target_imbalance=self.target_imbalance,
            load_floor=self.load_floor,
            objective=cast(crs.model.Objective, self.objective),
            cpu_overcommit=self.cpu_overcommit,
            memory_reserve_bytes=self.memory_reserve,
            usage_period=float(self.usage_period),
            containers=cast(crs.model.Containers, self.containers),
        )

    def switch_preset(self, preset: str, actor) -> None:
        """One click: the preset and the settings it shapes take the engine's values of that preset; audited."""
        values = crs.model.PRODUCT if preset == "product" else crs.model.PROXMOX
        before = {name: getattr(self, name) for name in ("preset", *self.PRESET_SETTINGS)}
        self.preset = preset
        for name in self.PRESET_SETTINGS:
            value = getattr(values, name)
            setattr(self, name, int(value) if name == "usage_period" else value)
        with transaction.atomic():
            self.save()
            AuditEvent.objects.create(
                actor=actor,
                action="preset-switched",
                cluster_id=self.cluster_id,
                details={"before": before, "after": {name: getattr(self, name) for name in before}},
            )

    def approves_itself(self, relative_gain: float) -> bool:
        """Whether a new recommendation with this gain is approved by the round, not a person."""
        if self.automation == "automatic":
            return True
        return self.automation == "partial" and relative_gain >= self.automatic_margin

    def approves_owed(self) -> bool:
        """Whether the round approves an owed plan (evacuation, failback, rule fix) itself.
        Owed moves ignore margins (priority 1, as Proxmox's manager makes them at once), so
        `partial`'s automatic margin holds none of them back: only `manual` waits for a person."""
        return self.automation != "manual"


class Round(models.Model):
    """One balancing round's outcome: a point of the imbalance trend and the round status."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="rounds")
    at = models.DateTimeField(db_index=True)
    imbalance = models.FloatField()  # fraction, engine scale
    threshold = models.FloatField()  # fraction, as it was for this round
    decision = models.CharField(max_length=20)
    hold_count = models.IntegerField()  # rounds of the hold served, as in the explanation
    explanation = models.JSONField()
    node_usage = models.JSONField()  # {node: {"cpu": fraction, "memory": fraction}}
    duration = models.FloatField(null=True, blank=True)  # seconds the round took (engine and recording), for /metrics
    happiness = models.FloatField(null=True, blank=True)  # share of happy guests (crs.happiness); None: no data
    # As it ages a round is folded into a mean over `span` seconds (history.py): 0 = one round.
    # A folded row's imbalance and threshold are means, `imbalance_max` the highest it covers,
    # its decision "downsampled", its explanation and node usage empty (node_samples keep those).
    span = models.IntegerField(default=0)
    samples = models.IntegerField(default=1)  # rounds it stands for
    imbalance_max = models.FloatField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["cluster", "at"])]
        ordering = ["at"]


class NodeSample(models.Model):
    """One node's measured CPU and memory use (fractions) at one collect, or their mean over
    `span` seconds once it ages (history.py): the node lines of the history."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="node_samples")
    at = models.DateTimeField()
    span = models.IntegerField(default=0)  # seconds the row covers: 0 = one collect
    samples = models.IntegerField(default=1)  # collects it averages
    node = models.CharField(max_length=100)
    cpu = models.FloatField()
    memory = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["cluster", "at"]), models.Index(fields=["span", "at"])]


class GuestSample(models.Model):
    """One guest's measured use on its node, as 1-minute means (one row per collect until its
    minute is folded), coarser as it ages: what a what-if replays (whatif.py)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="guest_samples")
    at = models.DateTimeField()
    span = models.IntegerField(default=0)  # 0 = one collect, then 60, 300, 3600 seconds
    samples = models.IntegerField(default=1)
    guest = models.CharField(max_length=40)
    node = models.CharField(max_length=100)
    cpu_usage = models.FloatField()  # cores in use
    mem_usage_bytes = models.FloatField()

    class Meta:
        indexes = [models.Index(fields=["cluster", "at"]), models.Index(fields=["span", "at"])]


class MigrationManager(models.Manager):
    # DESIGN.md "Migration states": the only transitions there are.
    TRANSITIONS = frozenset(
        {
            ("suggested", "approved"),
            ("suggested", "rejected"),
            ("suggested", "expired"),
            ("approved", "running"),
            ("approved", "expired"),
            ("running", "done"),
            ("running", "failed"),
        }
    )

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


def priority(step_gain: float) -> int:
    """vSphere DRS's grades from a step's gain: 2 ≥ 25 %, 3 ≥ 15 %, 4 ≥ 5 %, 5 below.
    1 (mandatory: rule fixes, evacuations) is never given for balancing."""
    return next((grade for grade, floor in ((2, 0.25), (3, 0.15), (4, 0.05)) if step_gain >= floor), 5)


class Migration(models.Model):
    STATES = ["suggested", "approved", "running", "done", "failed", "rejected", "expired"]

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
    # A recommendation is one step of a round's plan: the plan's number (the round that
    # computed it), its index, the step it was computed behind, and the plan's total gain.
    plan = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    step = models.PositiveSmallIntegerField(default=0)
    after = models.PositiveSmallIntegerField(null=True, blank=True)
    plan_gain = models.FloatField(null=True, blank=True)
    alternatives = models.JSONField(default=list, blank=True, help_text="Next-best targets, best first.")
    downtime = models.FloatField(
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

    objects = MigrationManager()

    class Meta:
        ordering = ["-suggested_at", "-pk"]
        permissions = [("approve_migration", "Can approve or reject recommended migrations")]
        indexes = [models.Index(fields=["cluster", "state"])]

    def __str__(self) -> str:
        return f"{self.leader} {self.source} → {self.target} ({self.state})"

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

        The engine decides (crs.balancer.stale_reason), under the cluster's current settings
        and guards (cooldown, way back, rejection memory).
        """
        if snapshot is None:
            return ""
        judged = self.cluster.under_policy(snapshot)
        # owed moves and a power-down's emptying (an evacuation ranked last): no guards, Proxmox's placement rules
        if self.kind in crs.precedence.MANDATORY or self.kind in crs.precedence.EMPTYING:
            return crs.mandatory.stale_reason(judged, self.as_move(), self.kind) or ""
        return crs.balancer.stale_reason(judged, self.as_move(), self.cluster.guards()) or ""


class AuditTrailError(Exception):
    """Raised when code tries to edit or delete an audit event: the trail is append-only."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AuditTrailError("audit events are never edited")

    def delete(self):
        raise AuditTrailError("audit events are never deleted")


class AuditEvent(models.Model):
    """Who did what, when. `actor` None means the system did it (a round, a worker).

    Append-only: an auditor must be able to trust that what is listed is what happened.
    Clusters and migrations with events cannot be deleted (PROTECT), and a user who is
    deleted leaves their username in `actor_name`. `cluster` is None only for the deletion
    of a cluster that had no events, which names it in `details`, and for a login lockout.
    """

    ACTIONS = [
        "settings-changed",
        "preset-switched",
        "emergency-stop",
        "waiting",
        "emergency-stop-lifted",
        "suggested",
        "approved",
        "rejected",
        "expired",
        "running",
        "done",
        "failed",
        "snapshot-imported",
        "cluster-created",
        "cluster-changed",
        "cluster-deleted",
        "login-locked-out",
        "maintenance-entered",
        "maintenance-left",
        "rule-created",
        "rule-changed",
        "rule-deleted",
        "rebalance-opt-out",
        "rebalance-opt-in",
        "window-added",
        "window-removed",
        "blackout-added",
        "blackout-removed",
        "automation-held",
        "window-changed",
        "blackout-changed",
        "plan-finished",
        "start-held",
        "rolling-started",
        "rolling-paused",
        "rolling-resumed",
        "rolling-cancelled",
        "rolling-step",
        "rolling-flagged",
        "rolling-go-on",
        "rolling-done",
        "capacity-settings-changed",
        "power-down-started",
        "power-down-emptied",
        "power-down-shutdown",
        "power-down-standby",
        "power-down-cancelled",
    ]

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_name = models.CharField(max_length=150, blank=True, editable=False)
    action = models.CharField(max_length=30)
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events")
    migration = models.ForeignKey(Migration, null=True, blank=True, on_delete=models.PROTECT)
    details = models.JSONField(default=dict, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [models.Index(fields=["cluster", "at"]), models.Index(fields=["action", "at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or 'system'} {self.action}"

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise AuditTrailError("audit events are never edited")
        if self.actor is not None:
            self.actor_name = self.actor.get_username()
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AuditTrailError("audit events are never deleted")


class Maintenance(models.Model):
    """A node's maintenance: when it began and ended, who asked, and the guests it held then
    (the ones that return when it ends, where failback says so). Open while `left_at` is empty;
    at most one open per node."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="maintenances")
    node = models.CharField(max_length=100)
    entered_at = models.DateTimeField(default=timezone.now)
    entered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    left_at = models.DateTimeField(null=True, blank=True)
    left_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    guests = models.JSONField(default=list, blank=True, help_text="Started guests on the node when it entered.")
    at_once = models.BooleanField(default=False, help_text="The evacuation runs without waiting for approval.")

    class Meta:
        ordering = ["-entered_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "node"],
                condition=models.Q(left_at__isnull=True),
                name="one_open_maintenance_per_node",
            )
        ]

    def __str__(self) -> str:
        return f"{self.node} of {self.cluster} in maintenance since {self.entered_at:%Y-%m-%d %H:%M}"


# -- notification destinations (sending them is dashboard/notify.py's) -------------------------------

EVENTS = {
    "recommendation-waiting": "a new plan waits for a person (manual, partial, or held by a window): one message",
    "migration-failed": "a migration failed (the first failure of a plan; the trail has the rest)",
    "source-unreachable": "collecting from the cluster started failing",
    "plan-finished": "every migration of a plan ended: how many were done and how many failed",
    "imbalance-above": "the imbalance stayed above the threshold for longer than the destination's imbalance_for:"
    " once per episode, again only after it fell to the threshold",
    "n1-bad": "the N+1 verdict turned bad: losing some node would leave guests without room (once per change)",
}


def apprise_url(value: str) -> None:
    """The URL as Apprise reads it; refused with the reason when Apprise cannot use it."""
    if not apprise.Apprise().add(value):
        raise ValidationError(
            "url: Apprise does not recognise this URL (e.g. json://host:port/path, mailto://user:pass@host, "
            "slack://…, ntfy://topic; see https://github.com/caronc/apprise/wiki)"
        )


def known_events(value) -> None:
    if not isinstance(value, list) or any(event not in EVENTS for event in value):
        raise ValidationError(f"events must be a list of: {', '.join(EVENTS)}")


class NotificationDestination(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="notification_destinations")
    name = models.CharField(max_length=100, help_text="Who or what receives it, e.g. 'ops chat'.")
    url = models.TextField(
        validators=[apprise_url], help_text="An Apprise URL; it may hold a secret, so only admins see it."
    )
    events = models.JSONField(default=list, validators=[known_events], help_text="Which events are sent here.")
    imbalance_for = models.DurationField(
        default=timedelta(minutes=15),
        validators=duration_validators("imbalance for", timedelta(0), timedelta(days=7)),
        help_text="imbalance-above: how long the imbalance must stay above the threshold before it is sent.",
    )
    # The episode (Cluster.above_threshold_since) this destination was last told of: one message each.
    imbalance_sent_for = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["cluster", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.cluster})"


# -- HA rules and the per-guest opt-out of simulated and imported clusters (dashboard/ha.py) --------


rule_id_validator = RegexValidator(
    r"\A[A-Za-z][A-Za-z0-9_-]{1,63}\Z",
    "rule must start with a letter and hold 2 to 64 letters, digits, - or _ (Proxmox's rule ids)",
)


class HaRule(models.Model):
    """One HA rule as Proxmox's rules.cfg holds it, for clusters whose rules the product keeps
    (simulated and imported); a Proxmox cluster's rules are read from the cluster instead.
    Every round's snapshot carries them (ha.applied); ha.validated is the only way in."""

    TYPES = ["node-affinity", "resource-affinity"]
    AFFINITIES = ["positive", "negative"]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="ha_rules")
    rule = models.CharField(max_length=64, validators=[rule_id_validator], help_text="The rule's id, as in Proxmox.")
    type = models.CharField(max_length=20, choices=[(t, t) for t in TYPES])
    resources = models.JSONField(default=list, help_text='Guest sids, e.g. ["vm:101", "ct:102"].')
    nodes = models.JSONField(
        default=list, blank=True, help_text='Node affinity: [{"node": "node1", "priority": 1}, …]; higher is preferred.'
    )
    strict = models.BooleanField(default=False, help_text="Node affinity: the guests may run on the listed nodes only.")
    affinity = models.CharField(
        max_length=10,
        choices=[(a, a) for a in AFFINITIES],
        default="positive",
        help_text="Resource affinity: positive keeps the guests together, negative apart. Node affinity: positive "
        "keeps them on the listed nodes, negative off them.",
    )

    class Meta:
        ordering = ["cluster", "rule"]
        constraints = [models.UniqueConstraint(fields=["cluster", "rule"], name="ha_rule_unique_id")]
        verbose_name = "HA rule"

    def __str__(self) -> str:
        return f"{self.rule} ({self.type}, {self.cluster})"

    def as_dict(self) -> dict:
        """The rule in the snapshot's terms (docs/snapshot-format.md `rules[]`)."""
        base = {"id": self.rule, "type": self.type, "resources": list(self.resources)}
        if self.type == "node-affinity":
            return {**base, "nodes": list(self.nodes), "strict": self.strict, "affinity": self.affinity}
        return {**base, "affinity": self.affinity}


class RebalanceOptOut(models.Model):
    """A guest that balancing rounds never pick (the snapshot's `auto_rebalance: false`)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="opt_outs")
    guest = models.CharField(max_length=20, help_text='The guest\'s sid, e.g. "vm:101".')
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["cluster", "guest"]
        constraints = [models.UniqueConstraint(fields=["cluster", "guest"], name="opt_out_unique_guest")]
        verbose_name = "auto-rebalance opt-out"

    def __str__(self) -> str:
        return f"{self.guest} opted out ({self.cluster})"


# -- change windows and blackouts (the gate itself is crs.windows, applied by dashboard/windows.py) ----

WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


def weekdays(value) -> None:
    if not isinstance(value, list) or not value or any(not isinstance(d, int) or not 0 <= d <= 6 for d in value):
        raise ValidationError("days must be a non-empty list of weekdays 0 (Monday) … 6 (Sunday)")


class ChangeWindow(models.Model):
    """A weekly window in which `automatic` and `partial` automation may start balancing moves,
    in wall-clock time of the cluster's time zone (Policy.time_zone). With none, any time may."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="change_windows")
    days = models.JSONField(validators=[weekdays], help_text="Weekdays it starts on: 0 = Monday … 6 = Sunday.")
    start = models.TimeField(help_text="From (wall clock, the cluster's time zone).")
    end = models.TimeField(help_text="To; at or before `start` it ends the next day (22:00–06:00).")

    class Meta:
        ordering = ["cluster", "start", "pk"]

    def __str__(self) -> str:
        days = ",".join(WEEKDAYS[d] for d in sorted(self.days or []))
        return f"{days} {self.start:%H:%M}–{self.end:%H:%M}"

    def clean(self) -> None:
        if self.start is not None and self.start == self.end:
            raise ValidationError({"end": "end must differ from start (a window of no time)"})


class Blackout(models.Model):
    """A one-off interval without automatic balancing moves, e.g. "backups Sunday 01:00–04:00"."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="blackouts")
    label = models.CharField(max_length=100, validators=[printable_name], help_text="Why, e.g. 'backups'.")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster", "starts_at", "pk"]

    def __str__(self) -> str:
        return f"{self.label} {self.starts_at:%Y-%m-%d %H:%M}–{self.ends_at:%H:%M} UTC"

    def clean(self) -> None:
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            raise ValidationError({"ends_at": "ends_at must be after starts_at"})


# The API token model lives in dashboard/tokens.py (which imports nothing of this module),
# beside the token's issue and lookup; imported here so Django finds it.
from .tokens import ApiToken  # noqa: E402, F401


class WhatIf(models.Model):
    """A replay of other settings over this cluster's stored history, run by a worker (whatif.py)."""

    STATES = ["queued", "running", "done", "failed"]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="whatifs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    period = models.DurationField(help_text="How much of the stored history is replayed, back from now.")
    changes = models.JSONField(help_text="The settings replayed, over the cluster's current ones.")
    state = models.CharField(max_length=10, choices=[(s, s) for s in STATES], default="queued")
    progress = models.FloatField(default=0.0)  # fraction of the replay done
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]


class RollingMaintenance(models.Model):
    """A rolling maintenance: the cluster's nodes taken down and brought back in turn (dashboard/rolling.py).

    Its queue is its RollingNode rows, so it survives a restart of the web and the worker; at most
    one is under way (running or paused) per cluster."""

    STATES = ["running", "paused", "cancelled", "done"]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="rollings")
    state = models.CharField(max_length=10, choices=[(s, s) for s in STATES], default="running")
    group_size = models.PositiveSmallIntegerField(default=1, help_text="Nodes taken down together at most.")
    at_once = models.BooleanField(default=True, help_text="Evacuations run without waiting for approval.")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster"],
                condition=models.Q(state__in=["running", "paused"]),
                name="one_rolling_maintenance_under_way",
            )
        ]

    def __str__(self) -> str:
        return f"rolling maintenance of {self.cluster} ({self.state})"


class RollingNode(models.Model):
    """One node of a rolling maintenance's queue and how far it got; `group`: the nodes of one
    group go down together (crs.rolling.groups), groups in order."""

    STEPS = ["waiting", "flagged", "draining", "waiting-admin", "returning", "done"]

    rolling = models.ForeignKey(RollingMaintenance, on_delete=models.CASCADE, related_name="queue")
    node = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField()
    group = models.PositiveSmallIntegerField()
    step = models.CharField(max_length=15, choices=[(s, s) for s in STEPS], default="waiting")
    warning = models.TextField(blank=True, help_text="Why taking the node down would break N+1.")
    go_on = models.BooleanField(default=False, help_text="An admin chose to go on despite the warning.")
    uptime_s = models.FloatField(
        null=True, blank=True, help_text="The node's uptime when it began waiting for the admin: less later = rebooted."
    )
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["rolling", "position"]
        constraints = [models.UniqueConstraint(fields=["rolling", "node"], name="rolling_node_once")]

    def __str__(self) -> str:
        return f"{self.node}: {self.step}"


def default_capacity_sizes() -> dict:
    """The standard guest sizes the capacity page counts (dashboard/capacity.py), until an admin edits them."""
    return {name: dict(size) for name, size in DEFAULT_CAPACITY_SIZES.items()}


DEFAULT_CAPACITY_SIZES = {
    "small": {"cores": 1.0, "memory_bytes": 2 * 2**30},
    "medium": {"cores": 4.0, "memory_bytes": 8 * 2**30},
    "large": {"cores": 8.0, "memory_bytes": 32 * 2**30},
}
DEFAULT_IDLE_WATTS = 120.0  # a two-socket server idling; the energy estimate says it is an estimate


class CapacitySettings(models.Model):
    """A cluster's standard guest sizes, the idle power of its nodes and its standby nodes (dashboard/capacity.py)."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="capacity_settings")
    sizes = models.JSONField(default=default_capacity_sizes, help_text="small, medium, large: cores, memory_bytes.")
    idle_watts = models.FloatField(default=DEFAULT_IDLE_WATTS, help_text="What one idle node draws (W).")
    standby = models.JSONField(
        default=list, blank=True, help_text="Nodes powered down on purpose, the first to wake first."
    )


class CapacitySample(models.Model):
    """How many more guests of one standard size fit, once an hour: the page's 30-day trend."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="capacity_samples")
    hour = models.DateTimeField(help_text="The start of the hour the figure stands for.")
    size = models.CharField(max_length=10)
    cores = models.FloatField()
    memory_bytes = models.FloatField()
    count = models.IntegerField()
    count_n1 = models.IntegerField(help_text="Keeping every node N+1-safe.")
    limited_by_n1 = models.JSONField(default=dict, help_text="Per reason, the nodes that refused the next one.")

    class Meta:
        ordering = ["cluster", "hour", "size"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hour", "size"], name="one_capacity_figure_an_hour")]


class PowerDown(models.Model):
    """A node an admin powers down (dashboard/power.py): it drains through its maintenance, then
    the source shuts it down (Proxmox) or the admin powers it off by hand, and it is standby.

        draining (in maintenance; its evacuation runs) → emptied (no source shutdown: the admin
        powers it off and marks it standby) → standby; draining → cancelled (left maintenance)
    """

    STATES = ["draining", "emptied", "standby", "cancelled"]
    OPEN = ["draining", "emptied"]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="power_downs")
    node = models.CharField(max_length=100)
    state = models.CharField(max_length=10, choices=[(s, s) for s in STATES], default="draining")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    changed_at = models.DateTimeField(default=timezone.now)
    note = models.TextField(blank=True, help_text="What happens next, or why the shutdown failed.")

    class Meta:
        ordering = ["-requested_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "node"],
                condition=models.Q(state__in=["draining", "emptied"]),
                name="one_open_power_down_per_node",
            )
        ]

    def __str__(self) -> str:
        return f"power-down of {self.node} ({self.state})"
