"""The clusters page (admins): add a Proxmox cluster, change it, archive or restore one; the form
tests the connection before saving. The page's script (static/connect.js) calls the API
(api/clusters.py), so the page and scripts add clusters one way, with one set of checks."""

from django.contrib.auth.decorators import permission_required
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from .. import connections
from ..models import Cluster


@never_cache
@permission_required("dashboard.change_cluster", raise_exception=True)
def clusters_page(request, pk: int | None = None):
    editing = get_object_or_404(Cluster, pk=pk, source_kind="proxmox") if pk else None
    config = {
        "save": reverse("api:cluster-detail", args=[pk]) if pk else reverse("api:cluster-list"),
        "method": "PATCH" if pk else "POST",
        "test": reverse("api:cluster-test-connection", args=[pk]) if pk else reverse("api:cluster-test-connection-new"),
        "page": reverse("dashboard:clusters"),
    }
    context = {
        "clusters": Cluster.objects.order_by("archived", "name").only(
            "name", "source_kind", "archived", "source_error"
        ),
        "editing": editing,
        "connection": connections.connection(editing) if editing else {"port": 8006, "tls": "system"},
        "config": config,
        "saved": request.GET.get("saved", ""),
    }
    return render(request, "dashboard/clusters.html", context)
