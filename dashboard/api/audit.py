"""The audit trail: filtered as on the audit page, exported as CSV or JSON."""

import csv
import json

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from ..audit import AuditFilterForm
from .base import ApiViewSet, Pages, form_parameters, valid_filter
from .serializers import AuditEventSerializer


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
