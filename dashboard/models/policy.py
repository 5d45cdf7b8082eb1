"""How one cluster is balanced: its settings, and the one bridge to the engine's (`engine_settings`)."""

from datetime import timedelta
from typing import cast

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction

import crs.fits
import crs.model

from .audit import AuditEvent
from .validators import (
    MAX_MEMORY_RESERVE,
    METHOD_CHOICES,
    MODE_CHOICES,
    SCALE_CHOICES,
    duration_validators,
    fraction_validators,
    known_time_zone,
    whole_number_validators,
)


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
    FORECAST_CHOICES = [
        ("off", "off: rounds react to the usage measured now"),
        ("on", "on: rounds also read each guest's next-hour peak, forecast from its past days"),
    ]
    PRESET_CHOICES = [
        ("proxmox", "proxmox: Proxmox's exact behaviour, one move per round"),
        ("product", "product: plans of several moves down to a target, no move that overfills a node"),
    ]
    # The settings' keys whose model field is named otherwise: the field carries its unit, as
    # the engine's names do; the key (the page's form, the JSON API, the audit trail, the
    # engine's settings) does not. The one map between the two (forms.py, api/, the reference).
    FIELD_OF_KEY = {
        "round_interval": "round_interval_s",
        "memory_reserve": "memory_reserve_bytes",
        "usage_period": "usage_period_s",
        "migration_speed": "migration_bytes_s",
    }
    KEY_OF_FIELD = {field: key for key, field in FIELD_OF_KEY.items()}
    # What a preset sets when an admin switches to it: the engine's values of that preset (by key).
    PRESET_SETTINGS = (
        "moves_per_round",
        "target_imbalance",
        "load_floor",
        "usage_period",
        "containers",
        "forecast",
        "minimum_dwell",
    )
    FRACTIONS = ("threshold", "margin", "automatic_margin", "target_imbalance", "load_floor")

    cluster = models.OneToOneField("Cluster", on_delete=models.CASCADE, related_name="policy")
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
    round_interval_s = models.IntegerField(
        "round interval",
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
    minimum_dwell = models.DurationField(
        default=timedelta(seconds=crs.model.PRODUCT.minimum_dwell),
        validators=duration_validators("minimum dwell", timedelta(0), timedelta(days=7)),
        help_text="How long a waiting recommendation stands before a better plan may replace it; "
        "at most the recommendation expiry.",
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
    memory_reserve_bytes = models.PositiveBigIntegerField(
        "memory reserve",
        default=0,
        validators=whole_number_validators("memory reserve", 0, MAX_MEMORY_RESERVE, "bytes"),
        help_text="Memory per node kept free of guests (bytes).",
    )
    migration_bytes_s = models.PositiveBigIntegerField(
        "migration speed",
        default=round(crs.model.PRODUCT.migration_mib_s * 2**20),
        validators=whole_number_validators("migration speed", 2**20, 2**40, "bytes per second"),
        help_text="How fast a migration copies a guest's memory (bytes per second): the time a move's cost counts.",
    )
    benefit_horizon = models.DurationField(
        default=timedelta(seconds=crs.model.PRODUCT.benefit_horizon),
        validators=duration_validators("benefit horizon", timedelta(minutes=1), timedelta(days=7)),
        help_text="How long a move's gain is expected to last where a guest's history does not say; "
        "a move is made only when its gain over this time outweighs its cost.",
    )
    max_migrations_per_node = models.IntegerField(
        default=1,
        validators=whole_number_validators("max migrations per node", 1, 16, ""),
        help_text="Migrations one node may take part in at once.",
    )
    objective = models.CharField(max_length=10, choices=OBJECTIVE_CHOICES, default="even")
    usage_period_s = models.IntegerField(
        "usage period",
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
    forecast = models.CharField(
        max_length=3,
        choices=FORECAST_CHOICES,
        default=crs.model.PRODUCT.forecast,
        help_text="Plans avoid nodes whose guests' daily peaks are due within the hour and move ahead "
        "of them; needs a day of guest history.",
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
        """The rules between settings, every broken one at once, beside each field it involves
        (by field; the form and the API name them by key): an admin fixes them in one go."""
        errors: dict[str, list[str]] = {}
        for fields, message in broken_rules(self):
            for name in fields:
                errors.setdefault(name, []).append(message)
        if errors:
            raise ValidationError(errors)

    @classmethod
    def field_of(cls, key: str) -> str:
        """The model field that stores the setting `key`."""
        return cls.FIELD_OF_KEY.get(key, key)

    @classmethod
    def key_of(cls, field: str) -> str:
        """The setting's key (form, API, audit trail) of the model field `field`."""
        return cls.KEY_OF_FIELD.get(field, field)

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
            memory_reserve_bytes=self.memory_reserve_bytes,
            usage_period=float(self.usage_period_s),
            containers=cast(crs.model.Containers, self.containers),
            forecast=cast(crs.model.ForecastUse, self.forecast),
            round_interval_s=float(self.round_interval_s),
            minimum_dwell=self.minimum_dwell.total_seconds(),
            migration_mib_s=self.migration_bytes_s / 2**20,
            benefit_horizon=self.benefit_horizon.total_seconds(),
        )

    def limits(self) -> crs.fits.Limits:
        """The capacity rule's limits under these settings (N+1, capacity, the guests page), whatever the preset."""
        settings = self.engine_settings()
        return crs.fits.Limits(float(settings.memory_reserve_bytes), settings.cpu_overcommit)

    def switch_preset(self, preset: str, actor) -> None:
        """One click: the preset and the settings it shapes take the engine's values of that preset; audited."""
        values = crs.model.PRODUCT if preset == "product" else crs.model.PROXMOX
        keys = ("preset", *self.PRESET_SETTINGS)  # the engine's names, the audit's keys
        before = {key: self._recorded(key) for key in keys}
        self.preset = preset
        for key in self.PRESET_SETTINGS:
            value = getattr(values, key)  # seconds for the durations, as the engine counts them
            stored = (
                timedelta(seconds=value) if key == "minimum_dwell" else int(value) if key == "usage_period" else value
            )
            setattr(self, self.field_of(key), stored)
        with transaction.atomic():
            self.save()
            AuditEvent.objects.create(
                actor=actor,
                action="preset-switched",
                cluster_id=self.cluster_id,
                details={"before": before, "after": {key: self._recorded(key) for key in keys}},
            )

    def _recorded(self, key: str):
        """A setting as the audit trail records it: in the API's units (a duration in seconds)."""
        value = getattr(self, self.field_of(key))
        return value.total_seconds() if isinstance(value, timedelta) else value


def broken_rules(policy: Policy) -> list[tuple[tuple[str, str], str]]:
    """The rules between settings `policy` breaks: each with the fields it involves and its words
    (a field left empty is not judged: its own error says so)."""
    p = policy
    rules: list[tuple[tuple[str, str], str]] = []
    if p.automatic_margin is not None and p.margin is not None and p.automatic_margin < p.margin:
        rules.append((("automatic_margin", "margin"), "automatic margin must be at least the margin"))
    if p.target_imbalance is not None and p.threshold is not None and p.target_imbalance > p.threshold:
        rules.append((("target_imbalance", "threshold"), "target imbalance must be at most the threshold"))
    if (
        p.minimum_dwell is not None
        and p.recommendation_expiry is not None
        and p.minimum_dwell > p.recommendation_expiry
    ):
        rules.append(
            (("minimum_dwell", "recommendation_expiry"), "minimum dwell must be at most the recommendation expiry")
        )
    return rules
