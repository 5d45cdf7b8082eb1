"""Migrations in any state, and the recommendations waiting for a person: approve or reject."""

from django import forms
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from ..approvals import approve_migration, decision_conflict, fail_migration, reject_migration
from ..models import (
    Migration,
    with_cluster,
)
from .base import ApiViewSet, Pages, by_cluster, filtered, form_parameters
from .filters import MigrationFilterForm
from .serializers import MigrationSerializer, RejectSerializer


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

    @extend_schema(
        request=None,
        responses={
            200: MigrationSerializer,
            409: OpenApiResponse(description="Not running (done, failed, …): `detail` says where it is."),
        },
    )
    @action(detail=True, methods=["post"], write_permission="dashboard.approve_migration")
    def fail(self, request, pk=None):
        """Mark failed: settle a running migration by hand once its follower is silent (the page offers
        it then); the task on the cluster is not stopped. Audited with you as actor."""
        migration, error = fail_migration(self.get_object().pk, request.user)
        data = MigrationSerializer(migration).data
        if error:
            return Response({"detail": error, "migration": data}, status.HTTP_409_CONFLICT)
        return Response(data)


class RecommendationFilterForm(forms.Form):
    cluster = MigrationFilterForm.base_fields["cluster"]


class RecommendationViewSet(ApiViewSet):
    """Recommendations waiting for a person (migrations in state `suggested`): approve or reject them."""

    serializer_class = MigrationSerializer
    read_permission = "dashboard.view_migration"
    write_permission = "dashboard.approve_migration"
    # as the plans computed them: plan, then step (a step is computed after the one before it)
    queryset = with_cluster(Migration.objects.filter(state="suggested"), "decided_by").order_by(
        "cluster_id", "plan", "step", "pk"
    )

    @extend_schema(parameters=form_parameters(RecommendationFilterForm))
    def list(self, request):
        data = filtered(RecommendationFilterForm, request)
        return Response(self.get_serializer(by_cluster(self.get_queryset(), data["cluster"]), many=True).data)

    def _decided(self, pk, wanted, recorded=True, refusal="", already=False):
        """200 with the migration if this decision took, 409 saying where it is otherwise. A second
        approval of an approved move (a double click, a colleague first) changes nothing: 200, saying so."""
        migration = Migration.objects.select_related("decided_by").get(pk=pk)
        if error := refusal or decision_conflict(migration, wanted, recorded):
            return Response(
                {"detail": error, "migration": MigrationSerializer(migration).data}, status.HTTP_409_CONFLICT
            )
        data = MigrationSerializer(migration).data
        if already:
            data["already"] = f"migration {pk} was {wanted} already: this changed nothing"
        return Response(data)

    def _pending(self, pk):
        """Any migration, so that a decision someone else made first answers 409 rather than 404;
        an id that never existed answers 404 in the admin's words."""
        try:
            return Migration.objects.select_related("cluster").get(pk=pk)
        except (Migration.DoesNotExist, ValueError):
            raise NotFound(f"no recommendation #{pk}") from None

    @extend_schema(
        request=None,
        responses={
            200: OpenApiResponse(
                MigrationSerializer,
                description="Approved; when it was approved already (a double click), `already` says so too.",
            ),
            409: OpenApiResponse(description="Already decided, or expired: `detail` says why."),
        },
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Approve, with the steps of its plan it was computed behind: it runs as soon as a slot is
        free. One that no longer fits the cluster expires (409)."""
        migration = self._pending(pk)
        refusal, approved = approve_migration(migration, request.user)
        return self._decided(migration.pk, "approved", refusal=refusal, already=migration.pk not in approved)

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
