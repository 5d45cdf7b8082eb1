"""Notification destinations and their test message."""

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from ..models import (
    NotificationDestination,
)
from ..notify import DeliveryFailed, send_test
from .base import ApiViewSet
from .serializers import DestinationSerializer


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
