"""The live page, its settings form, and /healthz. What the page asks and does in JSON is /api/v1/.

Every page needs a login (LoginRequiredMiddleware) and a role's permission (roles.py).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required, permission_required
from django.db import DatabaseError
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

import crs.model

from .. import health, history, overview
from ..forms import PolicyForm
from ..models import Cluster
from ..pressure import pressure_context
from . import overview as overview_page
from . import windows


@permission_required("dashboard.view_cluster", raise_exception=True)
def home(request):
    """The cluster's live page; the overview of them all once there is more than one."""
    if overview.several():
        return overview_page.page(request)
    cluster = Cluster.objects.select_related("policy").filter(archived=False).first()
    if cluster is None:
        return render(request, "dashboard/no_cluster.html")
    return _page(request, cluster)


@permission_required("dashboard.view_cluster", raise_exception=True)
def cluster(request, pk):
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    return _page(request, cluster)


def _page(request, cluster):
    """The live page. Its history comes from the API once the socket listens, not embedded here."""
    # A refused save comes back here by redirect, with what was typed (see change_settings).
    typed = request.session.pop(_typed_settings_key(cluster.pk), None)
    context = {
        "cluster": cluster,
        "clusters": Cluster.objects.filter(archived=False).only("name"),
        "form": PolicyForm(typed, instance=cluster.policy) if typed else PolicyForm(instance=cluster.policy),
        "live_paused": health.check(health.probe_channel_layer) != "ok",
        "can_decide": request.user.has_perm("dashboard.approve_migration") and not cluster.read_only,
        "all_stopped": not Cluster.objects.filter(archived=False, stop_all_at=None).exists(),
        "can_configure": request.user.has_perm("dashboard.change_policy"),
        "automation": windows.page_context(cluster),
        "ranges": [(name, f"{name[:-1]} {name[-1]}") for name in history.RANGES],  # "24h" → "24 h"
    } | pressure_context(cluster)
    return render(request, "dashboard/cluster.html", context)


def _typed_settings_key(pk) -> str:
    return f"settings-typed-{pk}"


@require_POST
@permission_required("dashboard.change_policy", raise_exception=True)
def change_settings(request, pk):
    """Post/redirect/get both ways: a refused save is kept in the session and shown at the
    form (#settings) with its errors, so a reload never re-submits and nothing typed is lost."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    form = PolicyForm(request.POST, instance=cluster.policy)
    if not form.is_valid():
        request.session[_typed_settings_key(pk)] = {f.html_name: request.POST.get(f.html_name, "") for f in form}
        return redirect(reverse("dashboard:cluster", args=[pk]) + "#settings")
    form.save_by(request.user)
    messages.success(request, "Settings saved. They apply from the next round; the hold counter starts again.")
    return redirect("dashboard:cluster", pk)


@require_POST
@permission_required("dashboard.change_policy", raise_exception=True)
def switch_preset(request, pk):
    """One click switches a cluster between Proxmox's behaviour and the product's; audited."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    preset = request.POST.get("preset", "")
    if preset not in crs.model.PRESETS:
        allowed = " or ".join(crs.model.PRESETS)
        return JsonResponse({"errors": {"preset": [f"preset must be {allowed}, not {preset!r}"]}}, status=400)
    cluster.policy.switch_preset(preset, request.user)
    messages.success(request, f"Preset {preset}: its settings apply from the next round.")
    return redirect("dashboard:cluster", pk)


@require_GET
@login_not_required  # load balancers and monitoring probe it without an account
def healthz(request):
    parts = health.components()
    checks = {name: parts[name] for name in ("database", "channel_layer")}
    clusters = []
    if checks["database"] == "ok":
        try:  # the probe may get a pooled connection that the next query finds gone
            clusters = list(Cluster.objects.only("name", "last_round_at", "source_error"))
        except DatabaseError as exc:
            checks["database"] = f"error: {exc}"
    rounds = {c.name: c.last_round_at.isoformat() if c.last_round_at else None for c in clusters}
    # Monitoring polls anonymously: it learns that a source fails; people logged in learn why.
    # (Without the database the session cannot be read: the answer stays JSON, a 503.)
    detail = checks["database"] == "ok" and request.user.is_authenticated
    sources = {
        c.name: ("ok" if not c.source_error else f"error: {c.source_error}" if detail else "error") for c in clusters
    }
    # The web serves when it has its database and channel layer: a load balancer must not take
    # it out for a dead worker or beat, which /healthz reports beside (and /metrics counts).
    ok = all(value == "ok" for value in checks.values())
    # An unreachable cluster is reported, not a 503: the service itself is healthy.
    return JsonResponse(
        {
            "ok": ok,
            **checks,
            **{name: parts[name] for name in ("worker", "proxmox_worker", "beat") if name in parts},
            "last_round": rounds,
            "sources": sources,
        },
        status=200 if ok else 503,
    )
