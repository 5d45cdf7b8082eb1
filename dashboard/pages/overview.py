"""The overview page: every cluster on one line, sortable and filterable, kept live by one push
per batch of rounds (tasks.push_overview). The landing page once there is more than one cluster."""

from django.contrib.auth.decorators import permission_required
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .. import overview

FILTERS = [
    ("all", "all clusters"),
    ("above", "above the threshold"),
    ("waiting", "recommendations waiting"),
    ("running", "migrations running"),
    ("n1", "N+1 fails"),
    ("source", "source unreachable"),
    ("late", "rounds late"),
]


@require_GET
@permission_required("dashboard.view_cluster", raise_exception=True)
def page(request):
    context = {"rows": overview.rows(), "filters": FILTERS, "nav_current": "overview"}
    return render(request, "dashboard/overview.html", context)


@require_GET
@permission_required("dashboard.view_cluster", raise_exception=True)
def rows(request):
    """The rows as the push sends them: what a page whose socket was away fetches on reconnect."""
    return JsonResponse({"type": "overview", "rows": overview.rows()})
