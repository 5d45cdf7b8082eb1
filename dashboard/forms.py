"""Edge validation: every message names the field and what it accepts (ranges live on the model).

The settings are stored in one unit per concept (fractions, durations, bytes). The page
shows and takes percent, minutes and GiB; the JSON API fractions, seconds and bytes. Each
of those conversions is one small field class below, used for every field of its unit.
"""

import math
from datetime import timedelta
from typing import cast

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction

from . import wording
from .models import TIME_ZONE_CHOICES, AuditEvent, Cluster, Policy

# The settings by key: the names the page's form posts, the JSON API takes and returns and the
# audit trail records. A key is its model field's name, unless the field carries its unit in its
# name (Policy.FIELD_OF_KEY, the one map between the two: the keys stay as admins know them).
SETTINGS = [
    "mode",
    "automation",
    "objective",
    "threshold",
    "target_imbalance",
    "hold_duration",
    "margin",
    "automatic_margin",
    "load_floor",
    "method",
    "imbalance_scale",
    "round_interval",
    "moves_per_round",
    "cooldown",
    "rejection_memory",
    "recommendation_expiry",
    "minimum_dwell",
    "benefit_horizon",
    "migration_speed",
    "max_concurrent_migrations",
    "max_migrations_per_node",
    "cpu_overcommit",
    "memory_reserve",
    "usage_period",
    "containers",
    "forecast",
    "time_zone",
]
POLICY_FIELDS = [Policy.field_of(key) for key in SETTINGS]  # the model fields the settings are stored in
DURATIONS = ("cooldown", "rejection_memory", "recommendation_expiry", "minimum_dwell", "benefit_horizon")
BYTES = ("memory_reserve_bytes",)
SPEEDS = ("migration_bytes_s",)


class UnitField(forms.FloatField):
    """A setting typed in one unit and stored in the model's: the one place that unit converts.

    The allowed range (`limits`, in stored units, from the model's validators) is checked in
    the typed unit, so the message speaks it: "threshold must be between 0 and 100 %".
    """

    unit = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.limits: tuple | None = None

    def shown(self, stored):
        return stored

    def stored(self, typed: float):
        return typed

    def to_python(self, value):
        if isinstance(value, str) and value.count(",") == 1 and "." not in value:
            value = value.replace(",", ".")  # a decimal comma, as many admins type it: "30,5"
        typed = super().to_python(value)
        if typed is None:
            return None
        if not math.isfinite(typed):
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid")
        if self.limits and not self.shown(self.limits[0]) <= typed <= self.shown(self.limits[1]):
            raise forms.ValidationError(self.error_messages["range"], code="range")
        return self.stored(typed)

    def validate(self, value) -> None:
        forms.Field.validate(self, value)  # FloatField's own check would take a duration for a number

    def prepare_value(self, value):
        """Stored → typed for the initial value ("30", not "30.0"); what the admin typed is shown as typed."""
        return value if value is None or isinstance(value, str) else number(self.shown(value))

    def describe(self, stored) -> str:
        return "–" if stored is None else f"{number(self.shown(stored))} {self.unit}".rstrip()


def number(value: float) -> str:
    return f"{value:.15g}"


class PercentField(UnitField):
    unit = "%"

    def shown(self, fraction):
        return round(fraction * 100, 9)

    def stored(self, percent):
        return percent / 100


class MinutesField(UnitField):
    unit = "minutes"

    def shown(self, duration):
        return duration.total_seconds() / 60

    def stored(self, minutes):
        return timedelta(minutes=minutes)


class SecondsField(UnitField):
    unit = "seconds"

    def shown(self, duration):
        return duration.total_seconds()

    def stored(self, seconds):
        return timedelta(seconds=seconds)


class GibField(UnitField):
    unit = "GiB"

    def shown(self, size):
        return size / 2**30

    def stored(self, gib):
        return round(gib * 2**30)


class BytesField(UnitField):
    unit = "bytes"

    def stored(self, size):
        return round(size)


class MibPerSecondField(UnitField):
    unit = "MiB/s"

    def shown(self, rate):
        return rate / 2**20

    def stored(self, mib_s):
        return round(mib_s * 2**20)


class BytesPerSecondField(BytesField):
    unit = "bytes/s"


def unit_fields(
    fraction: type[UnitField], duration: type[UnitField], size: type[UnitField], speed: type[UnitField]
) -> dict:
    return {
        **dict.fromkeys(Policy.FRACTIONS, fraction),
        **dict.fromkeys(DURATIONS, duration),
        **dict.fromkeys(BYTES, size),
        **dict.fromkeys(SPEEDS, speed),
    }


def limits(name: str) -> tuple:
    """The (low, high) the model's validators allow for `name`, in stored units."""
    validators = cast(models.Field, Policy._meta.get_field(name)).validators  # a column, not a relation
    low = next(v.limit_value for v in validators if isinstance(v, MinValueValidator))
    high = next(v.limit_value for v in validators if isinstance(v, MaxValueValidator))
    return low, high


class PolicyForm(forms.ModelForm):
    """The settings as the page and the admin site show them: percent, minutes, GiB.

    Numbers are typed in text fields (a numeric keyboard on phones): a browser's number field
    empties itself on letters or a decimal comma, and the server then saw a missing value.

    The form's fields are the model's (round_interval_s); what it posts, reads and names in its
    messages is the setting's key (round_interval): `add_prefix` gives each field its key as
    its HTML name, so the page and the JSON API take the same keys."""

    typed = True  # a person types the values (the JSON API's form: False)

    time_zone = forms.ChoiceField(
        choices=TIME_ZONE_CHOICES,
        initial="UTC",
        label="Time zone (of the change windows)",
        help_text=Policy._meta.get_field("time_zone").help_text,
    )

    class Meta:
        model = Policy
        fields = POLICY_FIELDS
        field_classes = unit_fields(PercentField, MinutesField, GibField, MibPerSecondField)
        labels = {
            "threshold": "Threshold (%)",
            "target_imbalance": "Target imbalance (%)",
            "margin": "Margin (%)",
            "automatic_margin": "Automatic margin (%)",
            "load_floor": "Load floor (%)",
            "hold_duration": "Hold duration (rounds)",
            "round_interval_s": "Round interval (seconds)",
            "usage_period_s": "Usage averaged over (seconds)",
            "automation": "Automation level",
            "cooldown": "Cooldown (minutes)",
            "rejection_memory": "Rejection memory (minutes)",
            "recommendation_expiry": "Recommendation expiry (minutes)",
            "minimum_dwell": "Minimum dwell (minutes)",
            "benefit_horizon": "Benefit horizon (minutes)",
            "migration_bytes_s": "Migration speed (MiB/s)",
            "max_concurrent_migrations": "Concurrent migrations (at most)",
            "max_migrations_per_node": "Migrations per node (at most)",
            "moves_per_round": "Moves per round (at most)",
            "cpu_overcommit": "CPU overcommit (cores per CPU thread)",
            "memory_reserve_bytes": "Memory reserve per node (GiB)",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            key = Policy.key_of(name)
            # Engine codes in words (wording.py): the values stay the codes the API takes.
            if key in wording.CHOICES and isinstance(field, forms.ChoiceField):
                field.choices = wording.CHOICES[key]
            field.help_text = wording.HELP.get(key, field.help_text)
            label = key.replace("_", " ")
            field.error_messages["required"] = f"{label} is required"
            whole = isinstance(field, forms.IntegerField) and not isinstance(field, forms.FloatField)
            kind = "a whole number" if whole else "a number"
            example = ", e.g. 3" if whole else ", e.g. 30.5 or 30,5"
            field.error_messages["invalid"] = f"{label} must be {kind}{example if self.typed else ''}"
            if self.typed and isinstance(field, forms.IntegerField | forms.FloatField):
                field.widget = forms.TextInput(attrs={"inputmode": "numeric" if whole else "decimal"})
            if isinstance(field, forms.ChoiceField):
                choices = field.choices  # a list once set (django-stubs types what the setter takes)
                allowed = ", ".join(str(value) for value, _ in choices if value != "")  # type: ignore[misc,union-attr]
                field.error_messages["invalid_choice"] = f"{label} must be one of: {allowed}"
                if name == "time_zone":  # some 600 names: say what they look like instead
                    field.error_messages["invalid_choice"] = (
                        "time zone must be an IANA zone name, e.g. Europe/Berlin or UTC"
                    )
            if isinstance(field, UnitField):
                field.limits = low, high = limits(name)
                shown = f"{number(field.shown(low))} and {number(field.shown(high))} {field.unit}".rstrip()
                field.error_messages["range"] = f"{label} must be between {shown}"
            # Other ranges are checked by the model's validators, whose messages name the field;
            # the form field's copies would say only "Ensure this value is greater than ...".
            field.validators = []

    def add_prefix(self, field_name: str) -> str:
        """A field's HTML name, the key its value is read by: the setting's key, not the model's name."""
        return super().add_prefix(Policy.key_of(field_name))

    def __getitem__(self, name: str) -> forms.BoundField:
        """A field by its model name or its key: form["round_interval"] is form["round_interval_s"]."""
        return super().__getitem__(Policy.field_of(name))

    def errors_by_key(self) -> dict:
        """The refusals as `{key: [{"message", "code"}]}`, keyed as the JSON API names the settings."""
        return {Policy.key_of(name): errors for name, errors in self.errors.get_json_data().items()}

    @classmethod
    def values(cls, policy: Policy) -> dict:
        """The settings by key, in this form's units, as numbers (the JSON API's answer, the audit's record)."""
        fields = cls.base_fields
        return {Policy.key_of(name): _in_units(fields[name], getattr(policy, name)) for name in POLICY_FIELDS}

    def save_by(self, actor) -> Policy:
        """Save the settings and audit what changed (by key, in the API's units), in one transaction."""
        api = PolicyApiForm.base_fields
        changes = {
            Policy.key_of(name): [
                _in_units(api[name], self.initial.get(name)),
                _in_units(api[name], self.cleaned_data[name]),
            ]
            for name in self.changed_data
        }
        if not changes:
            return self.instance  # nothing changed: no event, and the hold counter goes on
        with transaction.atomic():
            policy = self.save()
            AuditEvent.objects.create(
                actor=actor, action="settings-changed", cluster_id=policy.cluster_id, details={"changes": changes}
            )
        return policy


class PolicyApiForm(PolicyForm):
    """The settings as the JSON API reads and returns them: fractions, seconds, bytes."""

    typed = False

    class Meta(PolicyForm.Meta):
        field_classes = unit_fields(UnitField, SecondsField, BytesField, BytesPerSecondField)


def _in_units(field, stored):
    return field.shown(stored) if isinstance(field, UnitField) and stored is not None else stored


def describe_change(key: str, api_value) -> str:
    """A value the audit trail recorded (by key, in the API's units) as the settings form shows it ("30 %")."""
    name = Policy.field_of(key)
    page, api = PolicyForm.base_fields.get(name), PolicyApiForm.base_fields.get(name)
    if isinstance(page, UnitField) and isinstance(api, UnitField) and isinstance(api_value, int | float):
        return page.describe(api.stored(api_value))
    return "–" if api_value is None else str(api_value)


def json_type_errors(data: dict) -> dict:
    """The JSON API's own refusals, before the form's: unknown names, and values of the wrong
    JSON type, which a form would quietly coerce (true → 1, "30" → 30)."""
    errors = {}
    fields = {key: PolicyApiForm.base_fields[Policy.field_of(key)] for key in SETTINGS}
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            message = f"{key} is not a setting; the settings are: {', '.join(SETTINGS)}"
        elif value is None and not field.required:
            continue  # an optional setting cleared (target imbalance: the threshold)
        elif isinstance(field, forms.ChoiceField) and not isinstance(value, str):
            message = f"{key.replace('_', ' ')} must be a string"
        elif not isinstance(field, forms.ChoiceField) and (
            isinstance(value, bool) or not isinstance(value, int | float)
        ):
            message = f"{key.replace('_', ' ')} must be a number"
        else:
            continue
        errors[key] = [{"message": message, "code": "invalid"}]
    return errors


def json_settings(policy: Policy, data: dict) -> tuple[PolicyApiForm, dict]:
    """A JSON settings change (the REST API's PATCH, the page's JSON endpoint): the form over the
    stored values, and every refusal at once, as the page's form reports them: the JSON names and
    types first, then the form's rules for the fields of the right type."""
    typed = json_type_errors(data)
    changes = {key: value for key, value in data.items() if key not in typed}
    form = PolicyApiForm({**PolicyApiForm.values(policy), **changes}, instance=policy)
    return form, typed | ({} if form.is_valid() else form.errors_by_key())


class RejectForm(forms.Form):
    # Required: the audit trail must say why, and rejection memory keeps the move away meanwhile.
    reason = forms.CharField(
        max_length=500,
        strip=True,
        error_messages={
            "required": "reason is required: say why, for the audit trail",
            "max_length": "reason must be at most 500 characters",
        },
    )


def cluster_choice(**extra) -> forms.ModelChoiceField:
    """The `cluster` filter of the lists (audit, rounds, migrations, recommendations, rules): a
    cluster's id, refused by name when unknown. Only the name is read: a chosen cluster's stored
    snapshot (megabytes at 1000 nodes) is no part of a filter."""
    messages = {"invalid_choice": "cluster: no such cluster"}
    return forms.ModelChoiceField(Cluster.objects.only("name"), required=False, error_messages=messages, **extra)
