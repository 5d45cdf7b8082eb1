"""Rolling maintenance from the API (/api/v1/clusters/{id}/rolling/…); dashboard/rolling.py decides.

Its own router beside urls.py's and ha.py's under /api/v1/. Bad input answers 400 under the
field's name, a request the rolling maintenance's state refuses 409; every change queues its
next step at once (tasks.rolling_round) rather than waiting for the next round.
"""

from dataclasses import asdict

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter

from .. import events, rolling
from ..models import Cluster
from .base import ApiViewSet

CONFLICT = OpenApiResponse(description="Not possible in the rolling maintenance's state: `detail` says why.")


class StartSerializer(serializers.Serializer):
    nodes = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        allow_empty=False,
        help_text="The nodes to take down (default: every usable node); the product orders them.",
    )
    group_size = serializers.IntegerField(
        min_value=1,
        max_value=rolling.MAX_GROUP_SIZE,
        default=1,
        help_text="Nodes taken down together at most, only where none is a recovery target of another's guests.",
    )
    at_once = serializers.BooleanField(default=True, help_text="Run evacuations without waiting for approval.")


class NodeSerializer(serializers.Serializer):
    node = serializers.CharField(max_length=100, help_text="A node of the queue.")


STATUS = inline_serializer(
    "RollingMaintenance",
    {
        "id": serializers.IntegerField(),
        "state": serializers.ChoiceField(choices=["running", "paused", "cancelled", "done"]),
        "group_size": serializers.IntegerField(),
        "at_once": serializers.BooleanField(),
        "started_by": serializers.CharField(allow_null=True),
        "started_at": serializers.DateTimeField(),
        "finished_at": serializers.DateTimeField(allow_null=True),
        "queue": serializers.ListField(
            child=serializers.DictField(),
            help_text="In order: node, group, step (waiting, flagged, draining, waiting-admin, returning, done), "
            "label, warning (why N+1 breaks), go_on, guests_left, evacuating, command (Proxmox), changed_at.",
        ),
        "n1": serializers.DictField(allow_null=True, help_text="The cluster's N+1 verdict now."),
    },
)


def _answer(cluster: Cluster, code: int = status.HTTP_200_OK) -> Response:
    events.rolling_changed.send(Cluster, cluster_id=cluster.pk)
    found = rolling.status(cluster)
    return Response({**found, "queue": [asdict(q) for q in found["queue"]]} if found else None, status=code)


class ClusterRollingViewSet(ApiViewSet):
    """A cluster's rolling maintenance: start, pause, resume, cancel, and the admin's "node is back"."""

    queryset = Cluster.objects.select_related("policy")
    serializer_class = StartSerializer

    def _run(self, request, serializer_class, change, code=status.HTTP_200_OK):
        cluster = self.get_object()
        data = {}
        if serializer_class is not None:
            serializer = serializer_class(data=request.data)
            serializer.is_valid(raise_exception=True)
            data = serializer.validated_data
        answer = change(cluster, data)
        if isinstance(answer, list):  # "node is back": the migrations it expired
            events.node_back.send(Cluster, cluster_id=cluster.pk, expired=answer)
        return _answer(cluster, code)

    @extend_schema(responses={200: STATUS})
    @action(detail=True, pagination_class=None, url_path="rolling")
    def current(self, request, pk=None):
        """The latest rolling maintenance: its state, its queue and the cluster's N+1 verdict."""
        found = rolling.status(self.get_object())
        if found is None:
            raise NotFound("this cluster has had no rolling maintenance")
        return Response({**found, "queue": [asdict(q) for q in found["queue"]]})

    @extend_schema(request=StartSerializer, responses={201: STATUS, 409: CONFLICT})
    @action(detail=True, methods=["post"], url_path="rolling/start")
    def start(self, request, pk=None):
        """Start one over the given nodes (default all), in the product's order. Audited."""

        def start(cluster, data):
            rolling.start(cluster, data.get("nodes"), data["group_size"], data["at_once"], request.user)

        return self._run(request, StartSerializer, start, status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: STATUS, 409: CONFLICT})
    @action(detail=True, methods=["post"], url_path="rolling/pause")
    def pause(self, request, pk=None):
        """No further step and no further move of a node's evacuation until resumed (the move under
        way finishes). Safe to repeat."""
        return self._run(request, None, lambda cluster, _: rolling.set_state(cluster, "paused", request.user))

    @extend_schema(request=None, responses={200: STATUS, 409: CONFLICT})
    @action(detail=True, methods=["post"], url_path="rolling/resume")
    def resume(self, request, pk=None):
        """Go on from where it was paused: the held moves of the evacuation start. Safe to repeat."""
        return self._run(request, None, lambda cluster, _: rolling.set_state(cluster, "running", request.user))

    @extend_schema(request=None, responses={200: STATUS, 409: CONFLICT})
    @action(detail=True, methods=["post"], url_path="rolling/cancel")
    def cancel(self, request, pk=None):
        """Stop for good: no further step and no further move of a node's evacuation (the move under
        way finishes); a node in maintenance stays so (leave it from the maintenance panel)."""
        return self._run(request, None, lambda c, _: rolling.set_state(c, "cancelled", request.user))

    @extend_schema(request=NodeSerializer, responses={200: STATUS, 409: CONFLICT})
    @action(detail=True, methods=["post"], url_path="rolling/node-back")
    def node_back(self, request, pk=None):
        """The admin's "node is back": it leaves maintenance and its guests return. Safe to repeat. On
        Proxmox a node seen online again with a smaller uptime (rebooted) moves on without it."""
        return self._run(request, NodeSerializer, lambda c, data: rolling.node_is_back(c, data["node"], request.user))

    @extend_schema(request=NodeSerializer, responses={200: STATUS, 409: CONFLICT})
    @action(detail=True, methods=["post"], url_path="rolling/go-on")
    def go_on(self, request, pk=None):
        """Take a node flagged for breaking N+1 down anyway. Safe to repeat."""
        return self._run(request, NodeSerializer, lambda c, data: rolling.go_on(c, data["node"], request.user))


router = SimpleRouter()
router.register("clusters", ClusterRollingViewSet, basename="cluster-rolling")
