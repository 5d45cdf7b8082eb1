"""What-if replays: their state, progress and figures."""

from django import forms
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from ..models import (
    WhatIf,
)
from .base import ApiViewSet, Pages, by_cluster, filtered, form_parameters
from .filters import MigrationFilterForm
from .serializers import WhatIfSerializer


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
