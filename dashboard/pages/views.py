"""The live page, its settings form, the JSON API for approvals and settings, and /healthz.

Every page needs a login (LoginRequiredMiddleware) and a role's permission (roles.py).
"""

from functools import partial, wraps

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required, permission_required
from django.db import connection, transaction
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

import crs.model
from crs.fields import read_json

from .. import emergency, history, outcomes, plans
from ..forms import PolicyApiForm, PolicyForm, RejectForm, json_type_errors
from ..live import sender as live
from ..models import Cluster, Migration
from ..pressure import pressure_context
from ..tasks import execute
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
        "live_paused": _check(_probe_channel_layer) != "ok",
        "can_decide": request.user.has_perm("dashboard.approve_migration") and not cluster.read_only,
        "all_stopped": not Cluster.objects.filter(archived=False, stopped=False).exists(),
        "can_configure": request.user.has_perm("dashboard.change_policy"),
        "automation": windows.page_context(cluster),
        "outcomes": outcomes.summary(cluster),
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
    if errors := json_type_errors(data):
        return JsonResponse({"errors": errors}, status=400)
    form = PolicyApiForm({**PolicyApiForm.values(cluster.policy), **data}, instance=cluster.policy)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
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


def approve_migration(migration: Migration, user) -> tuple[str, list[int]]:
    """A person approves a pending recommendation and the steps it was computed behind (the page
    and the REST API alike); a step that no longer fits the latest snapshot expires instead, with
    the reason. Returns why nothing of its cluster can be migrated at all ("" when tried), and
    the migrations this call approved (a click that came second approved none)."""
    if refusal := _not_migratable(migration.cluster):
        return refusal, []
    with transaction.atomic():
        approved = plans.approve(migration, user)
        _after_commit(approved, approved + [migration.pk])
    return "", approved


def _not_migratable(cluster) -> str:
    """Why nothing of this cluster can be migrated, or ""."""
    if cluster.read_only:
        return f"cluster {cluster.name} is a read-only what-if cluster: nothing is migrated there"
    if cluster.archived:
        return f"cluster {cluster.name} is archived: it runs no rounds and no migrations"
    return ""


@require_POST
@api("dashboard.approve_migration")
def approve_all(request, pk):
    """Apply all: every pending recommendation of the cluster, in plan order."""
    cluster = get_object_or_404(Cluster, pk=pk)
    if refusal := _not_migratable(cluster):
        return JsonResponse({"error": refusal}, status=409)
    with transaction.atomic():
        approved = plans.approve_all(cluster, request.user)
        _after_commit(approved, approved)
    migrations = Migration.objects.filter(pk__in=approved).select_related("decided_by").order_by("plan", "step")
    return JsonResponse({"approved": [live.migration_payload(m) for m in migrations]})


@require_POST
@api("dashboard.approve_migration")
def reject(request, pk):
    migration = get_object_or_404(Migration, pk=pk)
    form = RejectForm(request.POST)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    recorded = reject_migration(migration, request.user, form.cleaned_data["reason"])
    return _decided(pk, "rejected", recorded)


def reject_migration(migration: Migration, user, reason: str) -> bool:
    """Reject one step with its reason (the steps computed behind it expire); False when another
    decision came first (this reason is not kept)."""
    with transaction.atomic():
        changed = plans.reject(migration, user, reason)
        _after_commit([], changed)
    return bool(changed)


@require_POST
@api("dashboard.approve_migration")
def mark_failed(request, pk):
    """An operator settles a running migration by hand: its follower is lost and the adapter cannot
    say, or the operator knows better. Audited with the operator as actor; a no-op unless running."""
    get_object_or_404(Migration, pk=pk)
    reason = f"marked failed by {request.user.get_username()}; the adapter's task was not stopped"
    with transaction.atomic():
        marked = Migration.objects.transition(pk, "running", "failed", request.user, reason=reason)
        if marked:
            transaction.on_commit(lambda: live.push_migration(pk))
    migration = Migration.objects.select_related("decided_by").get(pk=pk)
    payload = live.migration_payload(migration)
    if marked:
        return JsonResponse({"migration": payload})
    error = f"migration {pk} is {migration.state}, not running"
    return JsonResponse({"error": error, "migration": payload}, status=409)


@require_POST
@api("dashboard.approve_migration")
def emergency_stop(request, pk=None):
    """Emergency stop for one cluster (or all, without `pk`): `stop=1` stops, `stop=0` lifts it."""
    wanted = request.POST.get("stop", "1")
    if wanted not in ("0", "1"):
        return JsonResponse({"errors": {"stop": [f"stop must be 1 (stop) or 0 (lift), not {wanted!r}"]}}, status=400)
    clusters = [get_object_or_404(Cluster, pk=pk)] if pk is not None else list(Cluster.objects.filter(archived=False))
    answer = {}
    for cluster in clusters:
        if wanted == "1":
            stopped = emergency.stop(cluster, request.user)
            for expired in stopped["expired"]:
                live.push_migration(expired)
            answer[cluster.name] = {"stopped": True, **stopped}
        else:
            emergency.lift(cluster, request.user)
            answer[cluster.name] = {"stopped": False}
    return JsonResponse({"clusters": answer})


def _after_commit(approved: list[int], changed: list[int]) -> None:
    """Once committed: start what was approved (robust: with the broker down the approval
    stands, and the next round queues it again) and push what changed."""
    for pk in approved:
        transaction.on_commit(partial(execute.delay, pk), robust=True)
    for pk in dict.fromkeys(changed):
        transaction.on_commit(partial(live.push_migration, pk))


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


def decision_conflict(migration: Migration, wanted: str, recorded: bool = True) -> str:
    """Why a decision did not take (someone else decided first, or it expired); "" if it did."""
    if not recorded and migration.state == wanted:
        return f"migration {migration.pk} was {wanted} by someone else first: this decision was not recorded"
    if migration.state == wanted or (wanted == "approved" and migration.state in ("running", "done", "failed")):
        return ""
    reason = f" ({migration.reason})" if migration.reason else ""
    return f"migration {migration.pk} is {migration.state}{reason}, not a pending recommendation"


@require_GET
@login_not_required  # load balancers and monitoring probe it without an account
def healthz(request):
    checks = {
        "database": _check(lambda: connection.cursor().execute("SELECT 1")),
        "channel_layer": _check(_probe_channel_layer),
    }
    clusters = list(Cluster.objects.only("name", "last_round_at", "source_error")) if checks["database"] == "ok" else []
    rounds = {c.name: c.last_round_at.isoformat() if c.last_round_at else None for c in clusters}
    # Monitoring polls anonymously: it learns that a source fails; people logged in learn why.
    # (Without the database the session cannot be read: the answer stays JSON, a 503.)
    detail = checks["database"] == "ok" and request.user.is_authenticated
    sources = {
        c.name: ("ok" if not c.source_error else f"error: {c.source_error}" if detail else "error") for c in clusters
    }
    ok = all(value == "ok" for value in checks.values())
    # An unreachable cluster is reported, not a 503: the service itself is healthy.
    return JsonResponse({"ok": ok, **checks, "last_round": rounds, "sources": sources}, status=200 if ok else 503)


def _probe_channel_layer() -> None:
    async_to_sync(get_channel_layer().group_send)("healthz", {"type": "healthz.ping"})


def _check(probe) -> str:
    try:
        probe()
    except Exception as exc:  # a health check reports any failure instead of raising it
        return f"error: {exc}"
    return "ok"
