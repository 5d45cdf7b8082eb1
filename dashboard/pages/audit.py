"""The audit trail page: who did what, when, on which cluster; filtered, never edited."""

from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..audit import AuditFilterForm
from ..forms import describe_change

PAGE_SIZE = 100


@require_GET
@permission_required("dashboard.view_auditevent", raise_exception=True)
def audit(request):
    form = AuditFilterForm(request.GET)
    if not form.is_valid():
        return render(request, "dashboard/audit.html", {"form": form, "page": None}, status=400)
    page = Paginator(form.events(), PAGE_SIZE).get_page(request.GET.get("page"))
    for event in page:  # settings as the settings form shows them: "threshold: 30 % → 20 %"
        changes = event.details.get("changes", {})
        event.changes = [
            (name, describe_change(name, old), describe_change(name, new)) for name, (old, new) in changes.items()
        ]
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "dashboard/audit.html", {"form": form, "page": page, "query": query.urlencode()})
