"""The API's serializers: ModelSerializers over the model fields, so the stored units (fractions,
durations) are the API's units; the engine's dataclasses for nodes and guests."""

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework_dataclasses.serializers import DataclassSerializer

import crs.happiness
import crs.model

from .. import maintenance, whatif
from ..forms import BYTES, DURATIONS, SETTINGS, SPEEDS, PolicyApiForm, RejectForm, json_settings
from ..models import (
    EVENTS,
    AuditEvent,
    Blackout,
    ChangeWindow,
    Migration,
    NotificationDestination,
    Policy,
    Round,
    WhatIf,
    weekdays,
)
from .base import errors_of

# --- serializers ----------------------------------------------------------------------------------


class NodeSerializer(DataclassSerializer):
    class Meta:
        dataclass = crs.model.Node


class GuestSerializer(DataclassSerializer):
    happiness = serializers.SerializerMethodField(
        help_text="Share of time the guest was not stalled (DRS 2.0's VM score); null without pressure data."
    )

    class Meta:
        dataclass = crs.model.Guest

    def get_happiness(self, guest: crs.model.Guest) -> float | None:
        return crs.happiness.score(guest)


class NodeMaintenanceSerializer(DataclassSerializer):
    class Meta:
        dataclass = maintenance.NodeState


class MaintenanceRequestSerializer(serializers.Serializer):
    node = serializers.CharField(max_length=100, help_text="The node's name, as in the cluster's nodes.")
    at_once = serializers.BooleanField(
        default=False,
        help_text="Enter only: run the evacuation without waiting for approval, whatever the automation level.",
    )


class RoundSerializer(serializers.ModelSerializer):
    # The API's keys keep their names; the model's carry the unit.
    duration = serializers.FloatField(
        source="duration_s", read_only=True, allow_null=True, help_text="Seconds the round took (engine and recording)."
    )

    class Meta:
        model = Round
        fields = [
            "id",
            "cluster",
            "at",
            "imbalance",
            "threshold",
            "decision",
            "hold_count",
            "explanation",
            "node_usage",
            "duration",
            "happiness",
        ]


class PayoffSerializer(serializers.Serializer):
    """A recommendation's expected gain against its cost (crs.payoff), as the round computed them."""

    benefit = serializers.FloatField(help_text="The gain over the horizon, in `payoff_unit`.")
    cost = serializers.FloatField(help_text="What the move itself costs (copy, switchover), in `payoff_unit`.")
    payoff_unit = serializers.ChoiceField(
        choices=["imbalance-seconds", "guest-seconds"],
        help_text="imbalance-seconds (a fraction 0–1 × seconds): balancing; guest-seconds of stall: pressure relief.",
    )
    horizon_s = serializers.FloatField(help_text="Seconds the gain is expected to last.")
    copy_bytes = serializers.FloatField(help_text="Memory the migration copies, in bytes.")
    migration_speed = serializers.FloatField(help_text="The migration speed it was reckoned at, in bytes per second.")


class MigrationSerializer(serializers.ModelSerializer):
    decided_by: "serializers.SlugRelatedField[Any]" = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    downtime = serializers.FloatField(
        source="downtime_s",
        read_only=True,
        allow_null=True,
        help_text="Seconds of downtime: a container moves by a restart (estimate); null = live.",
    )
    payoff = PayoffSerializer(
        read_only=True,
        allow_null=True,
        help_text="Its expected gain against its cost; null for owed moves and under the proxmox preset (no gate).",
    )

    class Meta:
        model = Migration
        exclude = ["task_ids", "downtime_s"]


class LiveRoundSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    imbalance = serializers.FloatField(help_text="A fraction, 0–1.")
    threshold = serializers.FloatField(help_text="A fraction, 0–1, as it was for this round.")
    decision = serializers.CharField()
    hold_count = serializers.IntegerField()
    hold_duration = serializers.IntegerField(help_text="In rounds.")
    explanation = serializers.JSONField()
    node_usage = serializers.JSONField(
        help_text="Per node, `cpu` and `memory` as fractions, 0–1; `forecast`: the same at the next hour's "
        "forecast peak, for nodes with a forecast guest."
    )
    happiness = serializers.FloatField(allow_null=True, help_text="Share of happy guests, a fraction, 0–1.")


class StopSerializer(serializers.Serializer):
    """The two emergency stops, kept apart: "Lift all" lifts only `all`."""

    here = serializers.BooleanField(help_text="This cluster's own stop holds.")
    all = serializers.BooleanField(help_text='The stop "Stop all" set holds.')
    by = serializers.CharField(allow_null=True, help_text="Who set the first stop that still holds; null: none holds.")
    at = serializers.DateTimeField(allow_null=True, help_text="When that stop was set; null: none holds.")


class StateSerializer(serializers.Serializer):
    """What the live page loads before the pushes keep it current (dashboard/live/sender.py's payloads)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    stopped = serializers.BooleanField(help_text="An emergency stop holds (either of `stop`).")
    stop = StopSerializer()
    settings = serializers.JSONField(help_text="The preset and the settings, in the units of /settings/.")
    rounds = LiveRoundSerializer(many=True, help_text="Oldest first.")
    migrations = serializers.ListField(child=serializers.JSONField(), help_text="The 30 newest, as pushed.")
    source = serializers.JSONField(help_text="`error` (empty: collecting fine) and `at`.")  # type: ignore[assignment]  # a field named like Field.source
    n1 = serializers.JSONField(allow_null=True, help_text="The last N+1 verdict; null before the first.")


@extend_schema_serializer(component_name="Settings")  # the admin's word; the model stays Policy
class PolicySerializer(serializers.ModelSerializer):
    """The settings in the JSON API's units, in and out: fractions (0–1), durations in seconds,
    sizes in bytes (PolicyApiForm); the schema comes from the model fields, with those units.

    Input is checked as the JSON settings endpoint checks it, every bad field at once
    (forms.json_settings: names, JSON types, then the settings form with the model's rules and
    messages: ranges, allowed values, automatic margin ≥ margin); saving writes the audit
    trail, as the page does."""

    class Meta:
        model = Policy
        # The settings' keys, each read from its model field (round_interval from round_interval_s).
        fields = SETTINGS
        extra_kwargs = {key: {"source": field} for key, field in Policy.FIELD_OF_KEY.items()}

    def get_fields(self):
        fields = super().get_fields()
        for name in DURATIONS:
            fields[name] = serializers.FloatField(help_text=f"{fields[name].help_text} In seconds.".strip())
        for name in (*BYTES, *SPEEDS):
            key = Policy.key_of(name)  # memory_reserve, from memory_reserve_bytes
            help_text = f"{fields[key].help_text} In bytes{' per second' if name in SPEEDS else ''}.".strip()
            fields[key] = serializers.IntegerField(source=name if key != name else None, help_text=help_text)
        for name in Policy.FRACTIONS:
            fields[name].help_text = f"{fields[name].help_text or ''} A fraction, 0–1.".strip()
        return fields

    def to_representation(self, instance):
        return PolicyApiForm.values(instance)

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise ValidationError({"non_field_errors": ["the body must be a JSON object of settings"]})
        return data

    def update(self, instance, validated_data):
        form, errors = json_settings(instance, validated_data)
        if errors:
            raise ValidationError({name: [e["message"] for e in errs] for name, errs in errors.items()})
        return form.save_by(self.context["request"].user)


class JsonBoolean(serializers.BooleanField):
    """true or false, as the schema says: DRF's own also takes 0, 1, "yes", "on", … which a
    script may send by mistake, and an emergency stop read the wrong way round is no small thing."""

    def to_internal_value(self, data):
        if data is True or data is False:
            return data
        self.fail("invalid", input=data)


class EmergencyStopSerializer(serializers.Serializer):
    stop = JsonBoolean(
        default=True,
        help_text="true: stop (the default); false: lift the stop.",
        error_messages={"invalid": "stop must be true (stop) or false (lift)"},
    )


class ClusterStoppedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    stopped = serializers.BooleanField(help_text="An emergency stop holds (either of `stop`), after this call.")
    stop = StopSerializer()
    expired = serializers.ListField(child=serializers.IntegerField(), required=False, help_text="Approved, expired.")
    aborted = serializers.ListField(child=serializers.IntegerField(), required=False, help_text="Running, aborted.")
    abort_errors = serializers.ListField(child=serializers.CharField(), required=False)


class StoppedSerializer(serializers.Serializer):
    clusters = ClusterStoppedSerializer(many=True)


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField(help_text='The username, or "system" for rounds and workers.')

    class Meta:
        model = AuditEvent
        fields = ["id", "at", "actor", "action", "cluster", "migration", "details"]

    def get_actor(self, event) -> str:
        return event.actor_name or "system"


class RejectSerializer(serializers.Serializer):
    reason = serializers.CharField(
        max_length=500,
        help_text="Why, for the audit trail.",
        error_messages={  # the page's form's words
            "required": RejectForm.base_fields["reason"].error_messages["required"],
            "blank": RejectForm.base_fields["reason"].error_messages["required"],
            "max_length": RejectForm.base_fields["reason"].error_messages["max_length"],
        },
    )

    def validate(self, attrs):
        form = RejectForm(attrs)  # the page's rules and messages
        if not form.is_valid():
            raise ValidationError(errors_of(form))
        return form.cleaned_data


class KnownFields(serializers.ModelSerializer):
    """Refuses names it does not know: a typo ("end_at") would otherwise be dropped and the
    request answered 200 with nothing changed."""

    def to_internal_value(self, data):
        if isinstance(data, dict) and (unknown := sorted(set(data) - set(self.fields))):
            writable = ", ".join(name for name, field in self.fields.items() if not field.read_only)
            raise ValidationError({name: [f"{name} is not a field; the fields are: {writable}"] for name in unknown})
        return super().to_internal_value(data)


class ChangeWindowSerializer(KnownFields):
    days = serializers.ListField(
        child=serializers.IntegerField(), help_text="Weekdays it starts on: 0 = Monday … 6 = Sunday (at least one)."
    )

    class Meta:
        model = ChangeWindow
        fields = ["id", "cluster", "days", "start", "end"]

    def validate_days(self, value):
        try:
            weekdays(value)
        except DjangoValidationError as exc:
            raise ValidationError(exc.messages) from None
        return sorted(set(value))

    def validate(self, attrs):
        merged = kept(self, attrs, "start", "end")
        if merged["start"] == merged["end"]:
            raise ValidationError({"end": ["end must differ from start (a window of no time)"]})
        return attrs


class BlackoutSerializer(KnownFields):
    class Meta:
        model = Blackout
        fields = ["id", "cluster", "label", "starts_at", "ends_at"]

    def validate(self, attrs):
        merged = kept(self, attrs, "starts_at", "ends_at")
        if merged["ends_at"] <= merged["starts_at"]:
            raise ValidationError({"ends_at": ["ends_at must be after starts_at"]})
        return attrs


def kept(serializer: serializers.ModelSerializer, attrs: dict, *names: str) -> dict:
    """The fields `names` as they will be: a PATCH's values over the stored ones. A window stays
    in its cluster: a PATCH naming another is refused."""
    instance = serializer.instance
    if instance is None:
        return attrs
    if "cluster" in attrs and attrs["cluster"].pk != instance.cluster_id:
        raise ValidationError(
            {"cluster": [f"cluster cannot change (it is {instance.cluster_id}); remove this one and add one there"]}
        )
    return {name: attrs.get(name, getattr(instance, name)) for name in names}


class GateSerializer(serializers.Serializer):
    open = serializers.BooleanField()
    until = serializers.DateTimeField(allow_null=True, help_text="When that changes; null: not within a week.")
    reason = serializers.ChoiceField(
        ["", "window", "blackout"], help_text="Why closed: outside every window, or a blackout."
    )
    label = serializers.CharField(allow_blank=True, help_text="The blackout's label.")  # type: ignore[assignment]


class WindowRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    days = serializers.ListField(child=serializers.IntegerField())
    start = serializers.CharField(help_text="HH:MM in the cluster's time zone.")
    end = serializers.CharField()
    next_start = serializers.DateTimeField(allow_null=True, help_text="Its current or next run.")
    next_end = serializers.DateTimeField(allow_null=True)


class ProxmoxBalancerSerializer(serializers.Serializer):
    mode = serializers.CharField(help_text="basic, static or dynamic.")
    rebalance_on_start = serializers.BooleanField()
    auto_rebalance = serializers.BooleanField(help_text="ha-auto-rebalance as set.")
    rebalancing = serializers.BooleanField(help_text="Proxmox moves guests by itself (auto-rebalance, mode not basic).")
    threshold = serializers.FloatField(help_text="Fraction, whatever unit Proxmox stored.")
    margin = serializers.FloatField(help_text="Fraction.")
    hold_duration = serializers.FloatField(help_text="HA rounds.")
    method = serializers.CharField()
    unit = serializers.ChoiceField(
        ["percent", "fraction", "default"], help_text="How Proxmox stored threshold and margin."
    )
    raw = serializers.CharField(allow_blank=True, help_text="The crs option as Proxmox returned it.")


class AutomationSerializer(serializers.Serializer):
    time_zone = serializers.CharField()
    automation = serializers.CharField()
    gate = GateSerializer()
    held = serializers.CharField(
        allow_blank=True, help_text='Why a new plan would wait for a person; "" = it would not.'
    )
    windows = WindowRunSerializer(many=True)
    blackouts = BlackoutSerializer(many=True)
    proxmox_balancer = ProxmoxBalancerSerializer(allow_null=True, help_text="Proxmox clusters only.")


class PlanOutcomeSerializer(serializers.Serializer):
    plan = serializers.IntegerField()
    moves = serializers.IntegerField()
    finished_at = serializers.DateTimeField()
    imbalance_before = serializers.FloatField()
    predicted = serializers.FloatField(help_text="Imbalance the plan predicted after its last move.")
    observed_5m = serializers.FloatField(allow_null=True)
    observed_1h = serializers.FloatField(allow_null=True)


class OutcomeSummarySerializer(serializers.Serializer):
    days = serializers.IntegerField()
    moves = serializers.IntegerField(help_text="Migrations done in these days.")
    measured = serializers.IntegerField(help_text="Of them, with an observed imbalance.")
    predicted_change = serializers.FloatField(allow_null=True, help_text="Mean relative change predicted (−0.18).")
    observed_change_5m = serializers.FloatField(allow_null=True)
    observed_change_1h = serializers.FloatField(allow_null=True)
    judged = serializers.IntegerField(help_text='Of them, judged paid or not (docs/dashboard.md, "Moves that paid").')
    paid = serializers.IntegerField(help_text="Of the judged, the moves that paid.")
    paid_share = serializers.FloatField(allow_null=True, help_text="paid ÷ judged, 0–1; null while none is judged.")
    plans = PlanOutcomeSerializer(many=True)


class TrendPointSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="Start of the point's bucket.")
    imbalance = serializers.FloatField(help_text="Mean over the bucket's rounds (fraction).")
    imbalance_max = serializers.FloatField(help_text="Highest in the bucket (fraction).")
    threshold = serializers.FloatField()
    rounds = serializers.IntegerField(help_text="Rounds the point stands for.")


class MarkerSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The migration.")
    at = serializers.DateTimeField(help_text="When it started.")
    guests = serializers.ListField(child=serializers.CharField())
    source = serializers.CharField()  # type: ignore[assignment]  # a field of the payload, not Field.source
    target = serializers.CharField()
    state = serializers.CharField()
    approved_by = serializers.CharField(allow_null=True, help_text='A username, or "automatic".')
    imbalance_before = serializers.FloatField()
    imbalance_after = serializers.FloatField()


class NodePeakSerializer(serializers.Serializer):
    cpu = serializers.FloatField(help_text="A fraction of the node's CPU threads, 0–1 (above 1: overcommitted).")
    memory = serializers.FloatField(help_text="A fraction of the node's memory, 0–1.")


class NextHourSerializer(serializers.Serializer):
    at = serializers.DateTimeField(help_text="The round that forecast it.")
    nodes = serializers.DictField(
        child=NodePeakSerializer(),
        help_text="Per node with a forecast guest: its use with every forecast guest of it at its next-hour peak.",
    )


class HistorySerializer(serializers.Serializer):
    range = serializers.CharField()
    since = serializers.DateTimeField()
    resolution = serializers.IntegerField(help_text="Seconds per point.")
    points = TrendPointSerializer(many=True)
    markers = MarkerSerializer(many=True)
    forecast = NextHourSerializer(
        allow_null=True,
        help_text="The next hour's forecast peak per node, from the guests' own history of up to 28 days; "
        "null when the cluster's forecast is off or no guest has a day of history.",
    )


class PickSerializer(serializers.Serializer):
    guests = serializers.ListField(child=serializers.CharField(), help_text="Empty: no move lowers the imbalance.")
    source = serializers.CharField(allow_null=True)  # type: ignore[assignment]  # the payload's, not Field.source
    target = serializers.CharField(allow_null=True)
    imbalance_after = serializers.FloatField()
    busiest_after = serializers.FloatField(help_text="The highest CPU or memory load of a node after the move.")


class MethodsSerializer(serializers.Serializer):
    imbalance = serializers.FloatField()
    bruteforce = PickSerializer()
    topsis = PickSerializer()
    same = serializers.BooleanField()
    why = serializers.CharField()


class WhatIfRequestSerializer(serializers.Serializer):
    """For the schema: the form (whatif.WhatIfForm) checks the body."""

    threshold = serializers.FloatField(required=False, min_value=0, max_value=1)
    hold_duration = serializers.IntegerField(required=False, min_value=0, max_value=1000)
    margin = serializers.FloatField(required=False, min_value=0, max_value=1)
    method = serializers.ChoiceField(required=False, choices=crs.model.METHODS)
    period = serializers.ChoiceField(choices=list(whatif.PERIODS))


class WhatIfSerializer(serializers.ModelSerializer):
    created_by: "serializers.SlugRelatedField[Any]" = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = WhatIf
        fields = [
            "id",
            "cluster",
            "created_by",
            "created_at",
            "period",
            "changes",
            "state",
            "progress",
            "result",
            "error",
            "finished_at",
        ]


class DestinationSerializer(serializers.ModelSerializer):
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=list(EVENTS)), help_text="; ".join(f"{k}: {v}" for k, v in EVENTS.items())
    )

    class Meta:
        model = NotificationDestination
        fields = ["id", "cluster", "name", "url", "events", "created_at", "imbalance_for"]
