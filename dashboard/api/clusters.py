"""Clusters: added, changed and archived (admins), their connection tested, the nodes and
guests of their latest snapshot, settings, maintenance, outcomes, automation, history and
what-if replays."""

from functools import partial

from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from .. import automation, connections, events, history, maintenance, outcomes, whatif
from ..approvals import apply_all, not_migratable, toggle_stop
from ..forms import PolicyApiForm
from ..live import sender as live
from ..models import (
    Cluster,
)
from .base import ApiViewSet, errors_of, filtered, form_parameters
from .connections import (
    REPORT,
    ClusterDetailSerializer,
    ClusterWriteSerializer,
    ConnectionSerializer,
    check,
    stored_secret,
)
from .filters import HistoryRangeForm, OutcomeFilterForm, RoundsShownForm
from .parsers import StrictJSONParser
from .serializers import (
    AutomationSerializer,
    EmergencyStopSerializer,
    GuestSerializer,
    HistorySerializer,
    MaintenanceRequestSerializer,
    MethodsSerializer,
    MigrationSerializer,
    NodeMaintenanceSerializer,
    NodeSerializer,
    OutcomeSummarySerializer,
    PolicySerializer,
    StateSerializer,
    StoppedSerializer,
    WhatIfRequestSerializer,
    WhatIfSerializer,
)

# The actions that read JSON alone: a cluster's `proxmox` is an object and a connection's test
# carries one, which a form post cannot; the emergency stop's `stop` is a JSON boolean, which a
# form's "0" would read as one.
JSON_ONLY = (
    "create",
    "partial_update",
    "test_connection_new",
    "test_connection",
    "emergency_stop",
    "emergency_stop_all",
)


class ClusterViewSet(ApiViewSet):
    """Clusters, and the nodes and guests of their latest snapshot."""

    queryset = Cluster.objects.all()
    serializer_class = ClusterDetailSerializer

    def initial(self, request, *args, **kwargs):
        if self.action == "create":
            self.write_permission = "dashboard.add_cluster"
        super().initial(request, *args, **kwargs)

    def list(self, request):
        return Response(self.get_serializer(self.get_queryset(), many=True).data)

    def retrieve(self, request, pk=None):
        return Response(self.get_serializer(self.get_object()).data)

    def get_parsers(self):
        """JSON alone for the actions of JSON_ONLY; the others also take a form post."""
        method = str(getattr(getattr(self, "request", None), "method", "")).lower()
        if (getattr(self, "action", None) or getattr(self, "action_map", {}).get(method)) in JSON_ONLY:
            return [StrictJSONParser()]
        return super().get_parsers()

    @extend_schema(request=ClusterWriteSerializer, responses={201: ClusterDetailSerializer})
    def create(self, request):
        """Add a cluster (admins). A Proxmox cluster's token secret is stored encrypted and never
        shown again; test the connection first (test-connection). Audited, secrets as "***"."""
        return self._save(request, Cluster(), status.HTTP_201_CREATED)

    @extend_schema(request=ClusterWriteSerializer, responses=ClusterDetailSerializer)
    def partial_update(self, request, pk=None):
        """Change a cluster's name or source (admins); a connection without token_secret keeps the
        stored one. Audited."""
        return self._save(request, self.get_object(), status.HTTP_200_OK)

    def _save(self, request, cluster, answer):
        serializer = ClusterWriteSerializer(
            cluster if cluster.pk else None, data=request.data, partial=bool(cluster.pk)
        )
        serializer.is_valid(raise_exception=True)
        connections.save(cluster, request.user, **serializer.validated_data)
        return Response(ClusterDetailSerializer(cluster).data, answer)

    @extend_schema(request=None, responses=ClusterDetailSerializer)
    @action(detail=True, methods=["post"])
    def archive(self, request, pk=None):
        """Retire a cluster: no more rounds, off the page's list; its history and trail are kept. Audited."""
        return self._archive(request, True)

    @extend_schema(request=None, responses=ClusterDetailSerializer)
    @action(detail=True, methods=["post"])
    def unarchive(self, request, pk=None):
        """Bring an archived cluster back: its rounds resume. Audited."""
        return self._archive(request, False)

    def _archive(self, request, archived: bool):
        cluster = connections.save(self.get_object(), request.user, archived=archived)
        return Response(ClusterDetailSerializer(cluster).data)

    @extend_schema(operation_id="clusters_test_connection_new", request=ConnectionSerializer, responses=REPORT)
    @action(
        detail=False,
        methods=["post"],
        url_path="test-connection",
        url_name="test-connection-new",
    )
    def test_connection_new(self, request):
        """Test connection before saving, with the form's fields: reach, TLS verdict with the
        certificate's fingerprint, version, nodes and guests, HA, Proxmox's crs option, missing
        privileges (as `crs check proxmox`). The token is sent only once TLS passed."""
        serializer = ConnectionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(check(serializer.validated_data, serializer.validated_data["token_secret"]))

    @extend_schema(request=ConnectionSerializer(partial=True), responses=REPORT)
    @action(detail=True, methods=["post"], url_path="test-connection")
    def test_connection(self, request, pk=None):
        """Test a Proxmox cluster's stored connection, or it with the fields given changed (a
        fingerprint to trust, a new secret) before saving them."""
        cluster = self.get_object()
        stored = connections.connection(cluster)
        if stored is None:
            raise ValidationError({"source_kind": "only a proxmox cluster has a connection to test"})
        serializer = ConnectionSerializer(data={**stored, **request.data}, partial=True)
        serializer.is_valid(raise_exception=True)
        data = {**stored, **serializer.validated_data}
        secret = data.get("token_secret") or stored_secret(cluster)
        if not secret:
            raise ValidationError({"token_secret": "no token secret is stored: give one"})
        return Response(check(data, secret, cluster.source_config))

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

    @extend_schema(parameters=form_parameters(RoundsShownForm), responses=StateSerializer)
    @action(detail=True, pagination_class=None)
    def state(self, request, pk=None):
        """What the live page loads once its socket listens: the settings, the last rounds, the
        newest migrations, the source's health and the N+1 verdict, shaped as the pushes are."""
        cluster = self.get_object()
        shown = filtered(RoundsShownForm, request)["rounds"]
        settings = {"preset": cluster.policy.preset, **PolicyApiForm.values(cluster.policy)}
        state = {"id": cluster.pk, "name": cluster.name, "stopped": cluster.stopped, "stop": cluster.stop()}
        state["settings"] = settings
        return Response(state | live.history(cluster, shown))

    @extend_schema(methods=["GET"], responses=PolicySerializer)
    @extend_schema(methods=["PATCH", "POST"], request=PolicySerializer, responses=PolicySerializer)
    @action(
        detail=True,
        methods=["get", "patch", "post"],
        serializer_class=PolicySerializer,
        write_permission="dashboard.change_policy",
        url_path="settings",
    )
    def policy(self, request, pk=None):
        """Read or change the settings; a change applies from the next round and restarts the hold.
        POST is PATCH (the old session path /api/clusters/{id}/settings posts here by its 308)."""
        policy = self.get_object().policy
        if request.method == "GET":
            return Response(PolicySerializer(policy).data)
        serializer = PolicySerializer(policy, data=request.data, partial=True, context={"request": request})
        serializer.is_valid(raise_exception=True)
        return Response(PolicySerializer(serializer.save()).data)

    @extend_schema(
        request=None,
        responses={
            200: inline_serializer(
                "ApprovedAll",
                {
                    "approved": MigrationSerializer(many=True),
                    "refused": serializers.DictField(child=serializers.CharField()),
                },
            ),
            409: OpenApiResponse(description="Nothing of this cluster is migrated (what-if, archived): `detail`."),
        },
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="recommendations/approve-all",
        write_permission="dashboard.approve_migration",
    )
    def approve_all(self, request, pk=None):
        """Apply all, as the page's button: every pending recommendation, plan by plan in plan order,
        each re-checked on the latest snapshot; `refused` says why any did not take (by id)."""
        cluster = self.get_object()
        if refusal := not_migratable(cluster):
            return Response({"detail": refusal}, status=status.HTTP_409_CONFLICT)
        approved, refused = apply_all(cluster, request.user)
        return Response(
            {
                "approved": MigrationSerializer(approved, many=True).data,
                "refused": {str(pk): why for pk, why in refused.items()},
            }
        )

    @extend_schema(request=EmergencyStopSerializer, responses=StoppedSerializer)
    @action(
        detail=True,
        methods=["post"],
        url_path="emergency-stop",
        write_permission="dashboard.approve_migration",
    )
    def emergency_stop(self, request, pk=None):
        """Emergency stop (`stop`: true, the default) or lift it (false): automation paused, approved
        moves expire, running ones are aborted; nothing starts until it is lifted. Audited."""
        return self._stop(request, [self.get_object()], "here")

    @extend_schema(
        operation_id="clusters_emergency_stop_all", request=EmergencyStopSerializer, responses=StoppedSerializer
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="emergency-stop",
        url_name="emergency-stop-all",
        write_permission="dashboard.approve_migration",
    )
    def emergency_stop_all(self, request):
        """The emergency stop of every cluster that is not archived, or lifted on all (`stop`: false).
        This stop is kept apart from each cluster's own: lifting it leaves those. Audited per cluster."""
        return self._stop(request, list(Cluster.objects.filter(archived=False)), "all")

    def _stop(self, request, clusters, scope):
        serializer = EmergencyStopSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        stop = serializer.validated_data["stop"]
        answers = [{"id": c.pk, "name": c.name, **toggle_stop(c, request.user, stop, scope)} for c in clusters]
        return Response({"clusters": answers})

    @extend_schema(responses=NodeMaintenanceSerializer(many=True))
    @action(detail=True, pagination_class=None, url_path="maintenance")
    def maintenance(self, request, pk=None):
        """Every node: in maintenance or not, the guests still on it (and stopped, and moving), the
        evacuation moves under way, when it began and, once empty, when it emptied, and on a Proxmox
        cluster the `ha-manager` command that enters or leaves it. Before the first collect: no node."""
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
        expired = change(cluster, serializer.validated_data)
        for migration in expired:
            transaction.on_commit(partial(live.push_migration, migration), robust=True)
        events.collect_wanted.send(Cluster, cluster_id=cluster.pk)
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
        return Response(AutomationSerializer(automation.status(self.get_object())).data)

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
        return Response(WhatIfSerializer(created).data, status.HTTP_202_ACCEPTED)
