"""The REST API (/api/v1/): what the page shows and does, for scripts, with an OpenAPI 3 schema.

Django REST framework with drf-spectacular. Authentication by the session (the page, with
CSRF) or a per-user API token (tokens.py); either way the user's role (roles.py) decides,
with the same permissions the page's views ask for. Serializers are ModelSerializers over
the model fields, so the stored units (fractions, durations) are the API's units. Query
filters are Django forms (the audit page's own, for the trail), so a bad filter is refused
with the field named, and the schema's parameters are read off the same forms.
"""

import csv
import json
from datetime import UTC
from functools import partial
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import StreamingHttpResponse
from django.urls import include, path
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.generics import get_object_or_404  # a malformed id is a 404 too, not a 500
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import SAFE_METHODS, BasePermission, IsAuthenticated
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework_dataclasses.serializers import DataclassSerializer

import crs.happiness
import crs.model

from .. import history, maintenance, outcomes, tasks, whatif, windows
from ..audit import AuditFilterForm
from ..forms import POLICY_FIELDS, PolicyApiForm, RejectForm, cluster_choice, json_type_errors
from ..live import sender as live
from ..models import (
    EVENTS,
    AuditEvent,
    Blackout,
    ChangeWindow,
    Cluster,
    Migration,
    NotificationDestination,
    Policy,
    Round,
    WhatIf,
    weekdays,
    with_cluster,
)
from ..notify import DeliveryFailed, send_test
from ..pages.views import approve_migration, decision_conflict, reject_migration
from ..tokens import DEFAULT_LIFETIME, ApiToken

# --- the schema's query parameters ----------------------------------------------------------------


def form_parameters(form_class) -> list[OpenApiParameter]:
    """The query parameters of a filter form, for the schema: the form stays the one definition."""
    types = {
        forms.ModelChoiceField: OpenApiTypes.INT,
        forms.DateTimeField: OpenApiTypes.DATETIME,
        forms.DateField: OpenApiTypes.DATE,
    }
    parameters = []
    for name, field in form_class.base_fields.items():
        kind = next((t for cls, t in types.items() if isinstance(field, cls)), OpenApiTypes.STR)
        choices = None
        if isinstance(field, forms.ChoiceField) and not isinstance(field, forms.ModelChoiceField):
            choices = [value for value, _ in field.choices if value != ""]  # type: ignore[misc,union-attr]  # a list
        parameters.append(
            OpenApiParameter(name, kind, required=field.required, enum=choices, description=str(field.help_text or ""))
        )
    return parameters


def errors_of(form) -> dict:
    """A form's errors as the API gives them: field → messages (each naming the field)."""
    return {f: [e["message"] for e in errs] for f, errs in form.errors.get_json_data().items()}


def filtered(form_class, request) -> dict:
    """The filter form's cleaned values, or a 400 naming each bad field."""
    return valid_filter(form_class, request).cleaned_data


def valid_filter(form_class, request):
    """The filter form, valid, or a 400 naming each bad field. A parameter given empty is
    refused rather than read as absent: the schema says what each one takes."""
    form = form_class(request.query_params)
    empty = {
        name: [f"{name}: give a value or leave the parameter out"]
        for name in form.fields
        if request.query_params.get(name) == ""
    }
    if empty:
        raise ValidationError(empty)
    if not form.is_valid():
        raise ValidationError(errors_of(form))
    return form


# --- access ---------------------------------------------------------------------------------------


class RolePermission(BasePermission):
    """Reads need the view's `read_permission`, changes its `write_permission` (roles.py's names)."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        wanted = view.read_permission if request.method in SAFE_METHODS else view.write_permission
        self.message = f"your role lacks the permission {wanted}"
        return request.user.has_perm(wanted)


class Pages(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request):
        """A page_size that is not a whole number of 1 or more is refused (DRF would use the default)."""
        given = request.query_params.get(self.page_size_query_param)
        if given is not None and not (given.isdigit() and int(given) >= 1):
            raise ValidationError({"page_size": [f"page_size must be a whole number of 1 or more, not {given!r}"]})
        return super().get_page_size(request)


class ApiViewSet(viewsets.GenericViewSet):
    """The API answers for itself (401 as JSON), so the login-required middleware lets it through."""

    permission_classes = [RolePermission]
    lookup_value_regex = "[^/]+"  # any id reaches the view, which answers 404 in JSON for a malformed one
    read_permission = "dashboard.view_cluster"
    write_permission = "dashboard.change_cluster"

    @classmethod
    def as_view(cls, *args, **kwargs):
        view = super().as_view(*args, **kwargs)
        view.login_required = False  # type: ignore[attr-defined]  # read by LoginRequiredMiddleware
        return view


# --- serializers ----------------------------------------------------------------------------------


class ClusterSerializer(serializers.ModelSerializer):
    read_only = serializers.BooleanField(help_text="An imported snapshot: nothing is ever migrated.")  # type: ignore[assignment]

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "source_kind",
            "archived",
            "read_only",
            "collected_at",
            "source_error",
            "source_error_at",
            "hold_count",
            "last_round_at",
        ]


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


class MigrationSerializer(serializers.ModelSerializer):
    decided_by: "serializers.SlugRelatedField[Any]" = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = Migration
        exclude = ["task_ids"]


class PolicySerializer(serializers.ModelSerializer):
    """The settings, in their stored units; the schema comes from the model fields.

    Input is checked as the JSON settings endpoint checks it (forms.json_type_errors: names and
    JSON types), then saved through the settings form, which applies the model's rules with
    its messages (ranges, allowed values, automatic margin ≥ margin) and writes the audit
    trail, as the page does."""

    class Meta:
        model = Policy
        fields = POLICY_FIELDS

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise ValidationError({"non_field_errors": ["the body must be a JSON object of settings"]})
        if errors := json_type_errors(data):
            raise ValidationError({name: [e["message"] for e in errs] for name, errs in errors.items()})
        return data

    def update(self, instance, validated_data):
        form = PolicyApiForm({**PolicyApiForm.values(instance), **validated_data}, instance=instance)
        if not form.is_valid():
            raise ValidationError(errors_of(form))
        return form.save_by(self.context["request"].user)


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField(help_text='The username, or "system" for rounds and workers.')

    class Meta:
        model = AuditEvent
        fields = ["id", "at", "actor", "action", "cluster", "migration", "details"]

    def get_actor(self, event) -> str:
        return event.actor_name or "system"


class RejectSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=500, help_text="Why, for the audit trail.")

    def validate(self, attrs):
        form = RejectForm(attrs)  # the page's rules and messages
        if not form.is_valid():
            raise ValidationError(errors_of(form))
        return form.cleaned_data


class Username(serializers.SlugRelatedField):
    """A user by username; one with a NUL byte (which PostgreSQL cannot even look up) is simply unknown."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data.replace("\x00", "\\x00"))
        return super().to_internal_value(data)

    def get_value(self, dictionary):
        """`user=` in a form body is refused as JSON's "" is, not read as omitted (DRF's HTML-form rule)."""
        return "" if dictionary.get(self.field_name) == "" else super().get_value(dictionary)


class TokenSerializer(serializers.ModelSerializer):
    user = Username(
        slug_field="username",
        queryset=ApiToken._meta.get_field("user").related_model._default_manager.all(),
        required=False,
        help_text="Whose token (admins only); yourself when omitted.",
    )
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text=f"Default: in {DEFAULT_LIFETIME.days} days; null: never."
    )
    revoked = serializers.SerializerMethodField()

    class Meta:
        model = ApiToken
        fields = ["id", "name", "user", "prefix", "created_at", "expires_at", "last_used_at", "revoked", "revoked_at"]

    def get_revoked(self, token) -> bool:
        return token.revoked_at is not None

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise ValidationError("expires_at must be in the future")
        return value


class IssuedTokenSerializer(TokenSerializer):
    token = serializers.CharField(read_only=True, help_text="The secret. Shown this once; store it now.")

    class Meta(TokenSerializer.Meta):
        fields = TokenSerializer.Meta.fields + ["token"]


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
    plans = PlanOutcomeSerializer(many=True)


# --- filter forms (the audit trail's is audit.AuditFilterForm) --------------------------------------


class RoundFilterForm(forms.Form):
    cluster = cluster_choice()
    since = forms.DateTimeField(
        required=False, help_text="ISO 8601; from this time on.", error_messages={"invalid": "since must be ISO 8601"}
    )
    until = forms.DateTimeField(
        required=False, help_text="ISO 8601; before this time.", error_messages={"invalid": "until must be ISO 8601"}
    )

    def clean(self):
        super().clean()
        data = self.cleaned_data
        for name in ("since", "until"):  # in UTC: PostgreSQL refuses offsets Python accepts (e.g. -20:19)
            if data.get(name):
                try:
                    data[name] = data[name].astimezone(UTC)
                except OverflowError:
                    self.add_error(name, f"{name} is out of range once in UTC")
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError({"until": "until must be on or after since"})
        return data


class MigrationFilterForm(forms.Form):
    cluster = cluster_choice()
    state = forms.ChoiceField(
        choices=[("", "any")] + [(s, s) for s in Migration.STATES],
        required=False,
        error_messages={"invalid_choice": f"state must be one of: {', '.join(Migration.STATES)}"},
    )


class OutcomeFilterForm(forms.Form):
    days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=366,
        help_text=f"Days back; default {outcomes.SUMMARY_DAYS}.",
        error_messages={
            "invalid": "days must be a whole number",
            "min_value": "days must be between 1 and 366",
            "max_value": "days must be between 1 and 366",
        },
    )


class HistoryRangeForm(forms.Form):
    range = forms.ChoiceField(
        choices=[(name, name) for name in history.RANGES],
        required=False,
        help_text="How far back: 3h (default), 24h, 7d, 30d or 90d.",
        error_messages={"invalid_choice": f"range must be one of: {', '.join(history.RANGES)}"},
    )

    def clean_range(self) -> str:
        return self.cleaned_data["range"] or "3h"


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


class HistorySerializer(serializers.Serializer):
    range = serializers.CharField()
    since = serializers.DateTimeField()
    resolution = serializers.IntegerField(help_text="Seconds per point.")
    points = TrendPointSerializer(many=True)
    markers = MarkerSerializer(many=True)


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


class WhatIfFilterForm(forms.Form):
    cluster = MigrationFilterForm.base_fields["cluster"]


class WhatIfViewSet(ApiViewSet):
    """What-if replays, newest first: state, progress (0–1) and, once done, the figures."""

    serializer_class = WhatIfSerializer
    pagination_class = Pages
    queryset = WhatIf.objects.select_related("created_by")

    @extend_schema(parameters=form_parameters(WhatIfFilterForm))
    def list(self, request):
        data = filtered(WhatIfFilterForm, request)
        whatifs = by_cluster(self.get_queryset(), data["cluster"])
        return self.get_paginated_response(self.get_serializer(self.paginate_queryset(whatifs), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self.get_object()).data)


def by_cluster(queryset, cluster):
    return queryset.filter(cluster=cluster) if cluster else queryset


# --- views ----------------------------------------------------------------------------------------


class ClusterViewSet(ApiViewSet):
    """Clusters, and the nodes and guests of their latest snapshot."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer

    def list(self, request):
        return Response(self.get_serializer(self.get_queryset(), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self.get_object()).data)

    def _snapshot(self):
        snapshot = self.get_object().latest_snapshot()
        if snapshot is None:
            raise NotFound("this cluster has no snapshot yet (its first collection has not run)")
        return snapshot

    @extend_schema(responses=NodeSerializer(many=True))
    @action(detail=True, pagination_class=None)
    def nodes(self, request, pk=None):
        return Response(NodeSerializer(self._snapshot().nodes, many=True).data)

    @extend_schema(responses=GuestSerializer(many=True))
    @action(detail=True, pagination_class=None)
    def guests(self, request, pk=None):
        return Response(GuestSerializer(self._snapshot().guests, many=True).data)

    @extend_schema(methods=["GET"], responses=PolicySerializer)
    @extend_schema(methods=["PATCH"], request=PolicySerializer, responses=PolicySerializer)
    @action(
        detail=True,
        methods=["get", "patch"],
        serializer_class=PolicySerializer,
        write_permission="dashboard.change_policy",
        url_path="settings",
    )
    def policy(self, request, pk=None):
        """Read or change the settings; a change applies from the next round and restarts the hold."""
        policy = self.get_object().policy
        if request.method == "GET":
            return Response(PolicySerializer(policy).data)
        serializer = PolicySerializer(policy, data=request.data, partial=True, context={"request": request})
        serializer.is_valid(raise_exception=True)
        return Response(PolicySerializer(serializer.save()).data)

    @extend_schema(
        request=None,
        responses=inline_serializer(
            "ApprovedAll",
            {
                "approved": MigrationSerializer(many=True),
                "refused": serializers.DictField(child=serializers.CharField()),
            },
        ),
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="recommendations/approve-all",
        write_permission="dashboard.approve_migration",
    )
    def approve_all(self, request, pk=None):
        """Approve every pending recommendation of the cluster; `refused` says why any did not take."""
        approved, refused = [], {}
        for migration in self.get_object().migrations.select_related("cluster").filter(state="suggested"):
            refusal, _ = approve_migration(migration, request.user)
            migration.refresh_from_db()
            if error := refusal or decision_conflict(migration, "approved"):
                refused[str(migration.pk)] = error
            else:
                approved.append(migration)
        return Response({"approved": MigrationSerializer(approved, many=True).data, "refused": refused})

    @extend_schema(responses=NodeMaintenanceSerializer(many=True))
    @action(detail=True, pagination_class=None, url_path="maintenance")
    def maintenance(self, request, pk=None):
        """Every node: in maintenance or not, the guests still on it, the evacuation moves under way,
        and on a Proxmox cluster the `ha-manager` command that enters or leaves it."""
        self._snapshot()
        return Response(NodeMaintenanceSerializer(maintenance.states(self.get_object()), many=True).data)

    @extend_schema(
        request=MaintenanceRequestSerializer,
        responses={
            200: NodeMaintenanceSerializer(many=True),
            409: OpenApiResponse(description="Not possible here: `detail` says why (on Proxmox, the command to run)."),
        },
    )
    @action(detail=True, methods=["post"], url_path="maintenance/enter")
    def enter_maintenance(self, request, pk=None):
        """Put a node into maintenance: its guests are evacuated with Proxmox's placement, as a plan
        approved per the automation level (or at once). Audited; safe to repeat."""

        def enter(cluster, data) -> list[int]:
            maintenance.enter(cluster, data["node"], request.user, data["at_once"])
            return []  # nothing expires: the next round plans the evacuation

        return self._maintenance(request, enter)

    @extend_schema(
        request=MaintenanceRequestSerializer,
        responses={200: NodeMaintenanceSerializer(many=True), 409: OpenApiResponse(description="`detail` says why.")},
    )
    @action(detail=True, methods=["post"], url_path="maintenance/leave")
    def leave_maintenance(self, request, pk=None):
        """Take a node out of maintenance: guests come back where failback says so. Audited; safe to repeat."""
        return self._maintenance(request, lambda cluster, data: maintenance.leave(cluster, data["node"], request.user))

    def _maintenance(self, request, change):
        """`change` enters or leaves, returning the migrations it expired; then the pushes and a
        fresh collect (and round) now, not at the next beat, so the page shows the plan at once."""
        cluster = self.get_object()
        serializer = MaintenanceRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            expired = change(cluster, serializer.validated_data)
        except ValueError as exc:
            raise ValidationError({"node": [str(exc)]}) from exc
        except maintenance.Refused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        for migration in expired:
            transaction.on_commit(partial(live.push_migration, migration), robust=True)
        transaction.on_commit(lambda: tasks.collect.delay(cluster.pk), robust=True)
        return Response(NodeMaintenanceSerializer(maintenance.states(cluster), many=True).data)

    @extend_schema(parameters=form_parameters(OutcomeFilterForm), responses=OutcomeSummarySerializer)
    @action(detail=True, pagination_class=None, read_permission="dashboard.view_migration")
    def outcomes(self, request, pk=None):
        """The record of the last days: moves done, predicted and observed change of the imbalance, per plan."""
        days = filtered(OutcomeFilterForm, request)["days"] or outcomes.SUMMARY_DAYS
        return Response(OutcomeSummarySerializer(outcomes.summary(self.get_object(), days)).data)

    @extend_schema(responses=AutomationSerializer)
    @action(detail=True, pagination_class=None)
    def automation(self, request, pk=None):
        """Whether automation may start balancing moves now (change windows, blackouts, Proxmox's own
        balancer), until when, and why not; the windows' next runs as moments."""
        return Response(AutomationSerializer(windows.status(self.get_object())).data)

    @extend_schema(parameters=form_parameters(HistoryRangeForm), responses=HistorySerializer)
    @action(detail=True, pagination_class=None, read_permission="dashboard.view_round")
    def history(self, request, pk=None):
        """The imbalance trend over a range (means at the range's resolution) and the migrations started in it."""
        cluster = self.get_object()
        return Response(history.history_range(cluster, filtered(HistoryRangeForm, request)["range"]))

    @extend_schema(responses=MethodsSerializer)
    @action(detail=True, pagination_class=None)
    def methods(self, request, pk=None):
        """Bruteforce and TOPSIS side by side on the latest snapshot: the move each picks and why they differ."""
        return Response(whatif.compare_methods(self._snapshot()))

    @extend_schema(request=WhatIfRequestSerializer, responses={202: WhatIfSerializer})
    @action(detail=True, methods=["post"], url_path="whatif", write_permission="dashboard.approve_migration")
    def start_whatif(self, request, pk=None):
        """Replay other settings over this cluster's stored history, in the background; follow it at /whatifs/{id}/."""
        cluster = self.get_object()
        form = whatif.WhatIfForm(request.data if isinstance(request.data, dict) else {})
        if not form.is_valid():
            raise ValidationError(errors_of(form))
        created = whatif.create(cluster, form, request.user)
        transaction.on_commit(lambda: tasks.run_whatif.delay(created.pk))
        return Response(WhatIfSerializer(created).data, status.HTTP_202_ACCEPTED)


class RoundViewSet(ApiViewSet):
    """Balancing rounds, newest first: the imbalance trend and each round's decision and explanation."""

    serializer_class = RoundSerializer
    pagination_class = Pages
    read_permission = "dashboard.view_round"

    def get_queryset(self):
        return Round.objects.order_by("-at", "-pk")

    @extend_schema(parameters=form_parameters(RoundFilterForm))
    def list(self, request):
        data = filtered(RoundFilterForm, request)
        rounds = by_cluster(self.get_queryset(), data["cluster"])
        if data["since"]:
            rounds = rounds.filter(at__gte=data["since"])
        if data["until"]:
            rounds = rounds.filter(at__lt=data["until"])
        page = self.paginate_queryset(rounds)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)


class MigrationViewSet(ApiViewSet):
    """Every migration, newest first, in any state."""

    serializer_class = MigrationSerializer
    pagination_class = Pages
    read_permission = "dashboard.view_migration"
    queryset = Migration.objects.select_related("decided_by")

    @extend_schema(parameters=form_parameters(MigrationFilterForm))
    def list(self, request):
        data = filtered(MigrationFilterForm, request)
        migrations = by_cluster(self.get_queryset(), data["cluster"])
        if data["state"]:
            migrations = migrations.filter(state=data["state"])
        return self.get_paginated_response(self.get_serializer(self.paginate_queryset(migrations), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self.get_object()).data)


class RecommendationFilterForm(forms.Form):
    cluster = MigrationFilterForm.base_fields["cluster"]


class RecommendationViewSet(ApiViewSet):
    """Recommendations waiting for a person (migrations in state `suggested`): approve or reject them."""

    serializer_class = MigrationSerializer
    read_permission = "dashboard.view_migration"
    write_permission = "dashboard.approve_migration"
    queryset = with_cluster(Migration.objects.filter(state="suggested"), "decided_by")

    @extend_schema(parameters=form_parameters(RecommendationFilterForm))
    def list(self, request):
        data = filtered(RecommendationFilterForm, request)
        return Response(self.get_serializer(by_cluster(self.get_queryset(), data["cluster"]), many=True).data)

    def _decided(self, pk, wanted, recorded=True, refusal=""):
        migration = Migration.objects.select_related("decided_by").get(pk=pk)
        if error := refusal or decision_conflict(migration, wanted, recorded):
            return Response(
                {"detail": error, "migration": MigrationSerializer(migration).data}, status.HTTP_409_CONFLICT
            )
        return Response(MigrationSerializer(migration).data)

    def _pending(self, pk):
        """Any migration, so that a decision someone else made first answers 409 rather than 404."""
        return get_object_or_404(Migration.objects.select_related("cluster"), pk=pk)

    @extend_schema(
        request=None,
        responses={
            200: MigrationSerializer,
            409: OpenApiResponse(description="Already decided, or expired: `detail` says why."),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve: it runs as soon as a slot is free. One that no longer fits the cluster expires (409)."""
        migration = self._pending(pk)
        return self._decided(migration.pk, "approved", refusal=approve_migration(migration, request.user)[0])

    @extend_schema(
        request=RejectSerializer,
        responses={200: MigrationSerializer, 409: OpenApiResponse(description="Already decided.")},
    )
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        """Reject with a reason; the same move is not recommended again for the rejection memory."""
        migration = self._pending(pk)
        serializer = RejectSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        recorded = reject_migration(migration, request.user, serializer.validated_data["reason"])
        return self._decided(migration.pk, "rejected", recorded)


class AuditViewSet(ApiViewSet):
    """The audit trail, newest first; filters as on the audit page; export as CSV or JSON (unpaged)."""

    serializer_class = AuditEventSerializer
    pagination_class = Pages
    read_permission = "dashboard.view_auditevent"

    def events(self, request):
        return valid_filter(AuditFilterForm, request).events()

    @extend_schema(parameters=form_parameters(AuditFilterForm))
    def list(self, request):
        return self.get_paginated_response(
            self.get_serializer(self.paginate_queryset(self.events(request)), many=True).data
        )

    @extend_schema(parameters=form_parameters(AuditFilterForm), responses={(200, "text/csv"): OpenApiTypes.STR})
    @action(detail=False, url_path="export/csv", pagination_class=None)
    def export_csv(self, request):
        events = self.events(request)

        def rows():
            yield ["at", "actor", "action", "cluster", "migration", "details"]
            for event in events.iterator():
                data = AuditEventSerializer(event).data
                yield [
                    data["at"],
                    data["actor"],
                    data["action"],
                    data["cluster"],
                    data["migration"],
                    json.dumps(data["details"]),
                ]

        writer = csv.writer(Echo())
        response = StreamingHttpResponse((writer.writerow(row) for row in rows()), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="audit.csv"'
        return response

    @extend_schema(parameters=form_parameters(AuditFilterForm), responses=AuditEventSerializer(many=True))
    @action(detail=False, url_path="export/json", pagination_class=None)
    def export_json(self, request):
        response = Response(AuditEventSerializer(self.events(request), many=True).data)
        response["Content-Disposition"] = 'attachment; filename="audit.json"'
        return response


class Echo:
    """csv.writer's file: hands each row back to be streamed."""

    def write(self, value):
        return value


class TokenViewSet(ApiViewSet):
    """Your API tokens (admins: everyone's). The secret is shown once, in the answer to its creation.

    Revoking keeps the row (name, when created and last used), so a leak can be traced."""

    serializer_class = TokenSerializer
    permission_classes = [IsAuthenticated]
    queryset = ApiToken.objects.select_related("user")

    def get_queryset(self):
        tokens = super().get_queryset()
        return (
            tokens
            if self.request.user.has_perm("dashboard.manage_all_tokens")
            else tokens.filter(user=self.request.user)
        )

    def list(self, request):
        return Response(self.get_serializer(self.get_queryset(), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=TokenSerializer, responses={201: IssuedTokenSerializer})
    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        user = data.get("user", request.user)
        if user != request.user and not request.user.has_perm("dashboard.manage_all_tokens"):
            raise PermissionDenied("only admins create tokens for other users (permission dashboard.manage_all_tokens)")
        expires_at = data["expires_at"] if "expires_at" in data else timezone.now() + DEFAULT_LIFETIME
        token, secret = ApiToken.objects.issue(user, data["name"], expires_at)
        token.token = secret  # type: ignore[attr-defined]  # shown once, by IssuedTokenSerializer
        return Response(IssuedTokenSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request, pk=None):
        """Revoke: the token is refused from now on."""
        ApiToken.objects.filter(pk=self.get_object().pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        return Response(status=status.HTTP_204_NO_CONTENT)


class DestinationSerializer(serializers.ModelSerializer):
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=list(EVENTS)), help_text="; ".join(f"{k}: {v}" for k, v in EVENTS.items())
    )

    class Meta:
        model = NotificationDestination
        fields = ["id", "cluster", "name", "url", "events", "created_at", "imbalance_for"]


class DestinationViewSet(ApiViewSet, viewsets.ModelViewSet):
    """Where a cluster's notifications go (Apprise URLs) and which events each receives. Admins only:
    a URL may hold a secret (a webhook token, a mail password)."""

    serializer_class = DestinationSerializer
    queryset = NotificationDestination.objects.all()
    read_permission = write_permission = "dashboard.change_cluster"

    @extend_schema(
        request=None,
        responses={
            200: inline_serializer("Sent", {"sent": serializers.BooleanField()}),
            502: OpenApiResponse(description="The destination refused or was unreachable: `detail` says why."),
        },
    )
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Send a test notification now (not queued), to see the destination work."""
        destination = self.get_object()
        try:
            send_test(destination, request.user)
        except DeliveryFailed as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_502_BAD_GATEWAY)
        return Response({"sent": True})


class WindowViewSetBase(ApiViewSet, viewsets.ModelViewSet):
    """Created, edited (PATCH: the fields sent) and removed, each audited."""

    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    write_permission = "dashboard.change_policy"

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = windows.add(self.get_queryset().model, self.request.user, **data)

    def perform_update(self, serializer):
        """Applied under the row's lock and checked again there (windows.change): a concurrent
        PATCH or removal is seen, never overwritten."""
        fields = {k: v for k, v in serializer.validated_data.items() if k != "cluster"}
        model = self.get_queryset().model
        try:
            serializer.instance = windows.change(model, serializer.instance.pk, self.request.user, **fields)
        except model.DoesNotExist:
            raise NotFound("removed meanwhile") from None
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None

    def perform_destroy(self, instance):
        windows.remove(instance, self.request.user)


class ChangeWindowViewSet(WindowViewSetBase):
    """Weekly change windows: when `automatic` and `partial` automation may start balancing moves
    (wall clock in the cluster's time zone, the `time_zone` setting). With none: any time."""

    serializer_class = ChangeWindowSerializer
    queryset = ChangeWindow.objects.all()


class BlackoutViewSet(WindowViewSetBase):
    """One-off blackouts: no automatic balancing moves from `starts_at` to `ends_at`, whatever the windows."""

    serializer_class = BlackoutSerializer
    queryset = Blackout.objects.all()


router = SimpleRouter()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("rounds", RoundViewSet, basename="round")
router.register("migrations", MigrationViewSet, basename="migration")
router.register("recommendations", RecommendationViewSet, basename="recommendation")
router.register("audit", AuditViewSet, basename="audit")
router.register("tokens", TokenViewSet, basename="token")
router.register("notification-destinations", DestinationViewSet, basename="destination")
router.register("change-windows", ChangeWindowViewSet, basename="change-window")
router.register("blackouts", BlackoutViewSet, basename="blackout")
router.register("whatifs", WhatIfViewSet, basename="whatif")

# The schema and its docs describe and hold no data: readable without a login.
urlpatterns = [
    path("v1/", include((router.urls, "api"))),
    path("schema/", login_not_required(SpectacularAPIView.as_view()), name="api-schema"),
    path("docs/", login_not_required(SpectacularSwaggerView.as_view(url_name="api-schema")), name="api-docs"),
]
