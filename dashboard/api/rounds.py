"""Balancing rounds, newest first: the imbalance trend and each round's decision."""

from drf_spectacular.utils import extend_schema

from ..models import (
    Round,
)
from .base import ApiViewSet, Pages, by_cluster, filtered, form_parameters
from .filters import RoundFilterForm
from .serializers import RoundSerializer


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
