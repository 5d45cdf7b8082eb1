"""The rolling maintenance page: its queue, and the buttons that start, pause, resume, cancel it
and tell it a node is back (dashboard/rolling.py decides; the API's twin is api/rolling.py)."""

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from .. import events, rolling
from ..errors import BadInput, Refused
from ..models import Cluster


def _page(request, cluster, status_code=200, error=None):
    snapshot = cluster.latest_snapshot()
    context = {
        "cluster": cluster,
        "rolling": rolling.status(cluster),
        "nodes": [n.name for n in snapshot.nodes if n.usable] if snapshot else [],
        "can_change": request.user.has_perm("dashboard.change_cluster") and not cluster.read_only,
        "max_group_size": rolling.MAX_GROUP_SIZE,
        "error": error,
    }
    return render(request, "dashboard/rolling.html", context, status=status_code)


@require_GET
@permission_required("dashboard.view_cluster", raise_exception=True)
def page(request, pk):
    return _page(request, get_object_or_404(Cluster.objects.select_related("policy"), pk=pk))


ACTIONS = {"pause": "paused", "resume": "running", "cancel": "cancelled"}


@require_POST
@permission_required("dashboard.change_cluster", raise_exception=True)
def act(request, pk, what):
    """The page's buttons: start, pause, resume, cancel, node-back, go-on; refused → the page with why."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    post = request.POST
    try:
        if what == "start":
            size = post.get("group_size", "1").strip() or "1"
            if not size.isdigit():
                raise BadInput(f"group_size must be a whole number 1 … {rolling.MAX_GROUP_SIZE}", field="group_size")
            chosen = post.getlist("nodes") or None
            rolling.start(cluster, chosen, int(size), post.get("at_once") == "on", request.user)
            messages.success(request, "Rolling maintenance started.")
        elif what in ACTIONS:
            rolling.set_state(cluster, ACTIONS[what], request.user)
        elif what == "node-back":
            expired = rolling.node_is_back(cluster, post.get("node", ""), request.user)
            events.node_back.send(Cluster, cluster_id=cluster.pk, expired=expired)
        elif what == "go-on":
            rolling.go_on(cluster, post.get("node", ""), request.user)
        else:
            raise BadInput("action must be one of start, pause, resume, cancel, node-back, go-on", field="action")
    except Refused as exc:  # bad input (400) or not now (409), with why
        return _page(request, cluster, exc.status, str(exc))
    events.rolling_changed.send(Cluster, cluster_id=cluster.pk)
    return redirect("dashboard:rolling", pk)
