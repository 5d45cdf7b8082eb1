"""The REST API of capacity and power (/api/v1/clusters/{id}/capacity/, …/capacity-settings/,
…/power-down/ and …/power-down/standby/).

Its own router beside ha.py's under /api/v1/: the serializers check the JSON types (each
error under its field's name); capacity.py checks the bounds, as the page does.
"""

from dataclasses import asdict

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter

from .. import capacity, events, power
from ..models import Cluster
from .base import ApiViewSet


class SizeSerializer(serializers.Serializer):
    cores = serializers.FloatField(help_text=f"Configured cores, 0.1 to {capacity.MAX_CORES}.")
    memory_bytes = serializers.IntegerField(help_text="Configured memory in bytes, 64 MiB to 2**50.")


class CapacitySettingsSerializer(serializers.Serializer):
    small = SizeSerializer()
    medium = SizeSerializer(help_text="Also the standard guest the power suggestion counts room in.")
    large = SizeSerializer()
    idle_watts = serializers.FloatField(help_text="What one idle node draws (W), for the energy estimate.")
    idle_watts_default = serializers.FloatField(read_only=True)
    standby = serializers.ListField(
        child=serializers.CharField(max_length=100),
        help_text="Nodes powered down on purpose, the first to wake first (nodes of the cluster).",
    )


CAPACITY_SCHEMA = inline_serializer(
    "Capacity",
    {
        "fits_rule": serializers.CharField(),
        "cpu_overcommit": serializers.FloatField(),
        "memory_reserve_bytes": serializers.FloatField(),
        "n1_safe_now": serializers.BooleanField(),
        "overcommitted": serializers.DictField(
            child=serializers.CharField(), help_text="Nodes already beyond the fits rule: node → memory or cpu."
        ),
        "sizes": serializers.ListField(
            child=serializers.DictField(),
            help_text="Per standard size: count and count_n1 (how many more fit, without and with N+1), "
            "limited_by and limited_by_n1 (per reason, how many nodes refused the next one), per_node.",
        ),
        "power": serializers.DictField(
            help_text="The power-saving suggestion: power_off (with moves, watts_saved, kwh_per_day) or power_on."
        ),
        "trend": serializers.ListField(
            child=serializers.DictField(), help_text="Per size, the hourly figures of the last 30 days."
        ),
        "settings": CapacitySettingsSerializer(),
        "power_downs": serializers.ListField(
            child=serializers.DictField(),
            help_text="The open power-downs and the latest others: node, state (draining, emptied, standby, "
            "cancelled), label, note, command (Proxmox: what to run to enter maintenance), guests_left, evacuating.",
        ),
    },
)
REFUSED = OpenApiResponse(description="A bad field: its name and what it allows.")


class PowerDownSerializer(serializers.Serializer):
    node = serializers.CharField(max_length=100, help_text="A node of the cluster.")


POWER_DOWNS = inline_serializer("PowerDowns", {"power_downs": serializers.ListField(child=serializers.DictField())})
POWER_REFUSED = OpenApiResponse(description="Not possible now: `detail` names the reason.")


class ClusterCapacityViewSet(ApiViewSet):
    """A cluster's capacity (how many more standard guests fit) and power suggestions."""

    queryset = Cluster.objects.select_related("policy")
    serializer_class = CapacitySettingsSerializer
    write_permission = "dashboard.change_policy"

    @extend_schema(responses=CAPACITY_SCHEMA)
    @action(detail=True, pagination_class=None)
    def capacity(self, request, pk=None):
        """How many more guests of each standard size fit, with and without N+1, and why no more;
        the 30-day trend; which nodes could be powered down or on (suggestions only)."""
        cluster = self.get_object()
        report = capacity.report(cluster)
        if report is None:
            raise NotFound("no snapshot yet: the cluster's first collect gives one")
        return Response(report | _power_downs(cluster))

    @extend_schema(request=PowerDownSerializer, responses={200: POWER_DOWNS, 400: REFUSED, 409: POWER_REFUSED})
    @action(detail=True, methods=["post"], url_path="power-down", write_permission="dashboard.change_cluster")
    def power_down(self, request, pk=None):
        """Power a suggested node down: it enters maintenance and its evacuation runs at once (on
        Proxmox after `ha-manager crm-command node-maintenance enable`, which `command` shows); once
        empty, Proxmox shuts it down through its API and it is standby; other sources cannot, so the
        power-down waits as `emptied` for the admin to power it off by hand and mark it standby.
        Refused (409, with the reason) unless the suggestion empties the node and N+1 survives it.
        Audited; safe to repeat. Powering on is yours: wake-on-LAN is out of scope."""
        return self._power(request, power.start)

    @extend_schema(request=PowerDownSerializer, responses={200: POWER_DOWNS, 400: REFUSED, 409: POWER_REFUSED})
    @action(detail=True, methods=["post"], url_path="power-down/standby", write_permission="dashboard.change_cluster")
    def power_down_standby(self, request, pk=None):
        """The admin powered an emptied node off by hand: it is standby (on the standby list, and
        `standby` in the cluster's snapshots). Audited; safe to repeat."""
        return self._power(request, power.mark_standby)

    def _power(self, request, change):
        cluster = self.get_object()
        serializer = PowerDownSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        change(cluster, serializer.validated_data["node"], request.user)
        # a collect now: the round plans the evacuation (and moves the power-down on) without waiting for beat
        events.collect_wanted.send(Cluster, cluster_id=cluster.pk)
        return Response(_power_downs(cluster))

    @extend_schema(methods=["GET"], responses=CapacitySettingsSerializer)
    @extend_schema(methods=["PUT", "PATCH"], responses={200: CapacitySettingsSerializer, 400: REFUSED})
    @action(detail=True, methods=["get", "put", "patch"], url_path="capacity-settings", pagination_class=None)
    def capacity_settings(self, request, pk=None):
        """The standard sizes, the idle power per node and the standby nodes; changes are audited."""
        cluster = self.get_object()
        if request.method == "GET":
            return Response(capacity.as_dict(capacity.settings_of(cluster)))
        serializer = self.get_serializer(data=request.data, partial=request.method == "PATCH")
        serializer.is_valid(raise_exception=True)
        data = {
            name: dict(value) if isinstance(value, dict) else value for name, value in serializer.validated_data.items()
        }
        saved = capacity.save_settings(cluster.pk, data, request.user)
        return Response(capacity.as_dict(saved))


def _power_downs(cluster: Cluster) -> dict:
    return {"power_downs": [asdict(p) for p in power.status(cluster)]}


router = SimpleRouter()
router.register("clusters", ClusterCapacityViewSet, basename="cluster-capacity")
