"""The live page, its settings form, the JSON API for approvals and settings, and /healthz.

Every page needs a login (LoginRequiredMiddleware) and a role's permission (roles.py).
"""

from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required, permission_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

import crs.model
from crs.fields import read_json

from .. import health, history, overview
from ..approvals import approve_migration, decision_conflict, fail_migration, reject_migration
from ..forms import PolicyApiForm, PolicyForm, RejectForm, json_settings
from ..live import sender as live
from ..models import Cluster, Migration
from ..pressure import pressure_context
from . import overview as overview_page
from . import windows


def api(permission: str):
    """The JSON API's access check: 401 without a login, 403 without the role's permission.

    An API client gets JSON, never the login page; LoginRequiredMiddleware is told to leave
    these views alone because they answer for themselves.
    """

    def decorate(view):
        @login_not_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return JsonResponse({"error": "log in first"}, status=401)
            if not request.user.has_perm(permission):
                return JsonResponse({"error": f"your role lacks the permission {permission}"}, status=403)
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


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
        "all_stopped": not Cluster.objects.filter(archived=False, stopped=False).exists(),
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
        request.session[_typed_settings_key(pk)] = {name: request.POST.get(name, "") for name in form.fields}
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
@api("dashboard.view_cluster")
def api_cluster(request, pk):
    """The cluster's state; `?rounds=N` keeps only its last N rounds (the page asks for 1)."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    shown = request.GET.get("rounds", str(live.ROUNDS_SHOWN))
    if not shown.isascii() or not shown.isdigit() or not 1 <= int(shown) <= live.ROUNDS_SHOWN:
        return JsonResponse(
            {"errors": {"rounds": [f"rounds must be a whole number from 1 to {live.ROUNDS_SHOWN}, not {shown!r}"]}},
            status=400,
        )
    return JsonResponse(
        {
            "id": cluster.pk,
            "name": cluster.name,
            "stopped": cluster.stopped,
            "settings": {"preset": cluster.policy.preset, **PolicyApiForm.values(cluster.policy)},
            **live.history(cluster, int(shown)),
        }
    )


@require_POST
@api("dashboard.change_policy")
def api_settings(request, pk):
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    try:
        data = read_json(request.body, ValueError, "body")
    except ValueError as exc:  # NaN, a 400-digit number, NUL, deep nesting, a key twice: named
        return JsonResponse({"error": f"the body must be a JSON object of settings: {exc}"}, status=400)
    if not isinstance(data, dict):
        return JsonResponse({"error": "the body must be a JSON object of settings"}, status=400)
    form, errors = json_settings(cluster.policy, data)
    if errors:
        return JsonResponse({"errors": errors}, status=400)
    return JsonResponse({"settings": PolicyApiForm.values(form.save_by(request.user))})


@require_POST
@api("dashboard.approve_migration")
def approve(request, pk):
    """Approve one recommendation, and the steps of its plan it was computed behind."""
    migration = get_object_or_404(Migration.objects.select_related("cluster"), pk=pk)
    refusal, approved = approve_migration(migration, request.user)
    if refusal:
        return JsonResponse({"error": refusal, "migration": live.migration_payload(migration)}, status=409)
    return _decided(pk, "approved", already=pk not in approved)


@require_POST
@api("dashboard.approve_migration")
def reject(request, pk):
    migration = get_object_or_404(Migration, pk=pk)
    form = RejectForm(request.POST)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    recorded = reject_migration(migration, request.user, form.cleaned_data["reason"])
    return _decided(pk, "rejected", recorded)


@require_POST
@api("dashboard.approve_migration")
def mark_failed(request, pk):
    get_object_or_404(Migration, pk=pk)
    migration, error = fail_migration(pk, request.user)
    payload = live.migration_payload(migration)
    return (
        JsonResponse({"error": error, "migration": payload}, status=409)
        if error
        else JsonResponse({"migration": payload})
    )


def _decided(pk, wanted, recorded: bool = True, already: bool = False):
    """200 with the migration if this decision took, 409 saying where it is otherwise. A second
    approval of an approved move (a double click, a colleague first) changes nothing: 200, saying so."""
    migration = Migration.objects.select_related("decided_by").get(pk=pk)
    payload = live.migration_payload(migration)
    if error := decision_conflict(migration, wanted, recorded):
        return JsonResponse({"error": error, "migration": payload}, status=409)
    if already:
        return JsonResponse(
            {"already": f"migration {pk} was {wanted} already: this changed nothing", "migration": payload}
        )
    return JsonResponse({"migration": payload})


@require_GET
@login_not_required  # load balancers and monitoring probe it without an account
def healthz(request):
    parts = health.components()
    checks = {name: parts[name] for name in ("database", "channel_layer")}
    clusters = list(Cluster.objects.only("name", "last_round_at", "source_error")) if checks["database"] == "ok" else []
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
            "worker": parts["worker"],
            "beat": parts["beat"],
            "last_round": rounds,
            "sources": sources,
        },
        status=200 if ok else 503,
    )
