"""The what-if page: both methods on the latest snapshot, and the form that replays other settings."""

from django.contrib.auth.decorators import permission_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from crs.errors import CrsError

from ..forms import PolicyForm
from ..models import Cluster
from ..whatif import PERIODS, compare_methods


@require_GET
@permission_required("dashboard.view_cluster", raise_exception=True)
def page(request, pk):
    """Both methods on the latest snapshot, and the form that replays other settings (whatif.js runs it)."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    try:
        snapshot = cluster.latest_snapshot()
    except CrsError:
        snapshot = None
    latest = cluster.whatifs.values_list("pk", flat=True).first()
    return render(
        request,
        "dashboard/whatif.html",
        {
            "cluster": cluster,
            "policy": cluster.policy,
            "settings_form": PolicyForm(instance=cluster.policy),  # threshold and margin typed in percent
            "methods": compare_methods(snapshot) if snapshot else None,
            "periods": list(PERIODS),
            "latest": latest,
            "can_run": request.user.has_perm("dashboard.approve_migration"),
        },
    )
