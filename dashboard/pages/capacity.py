"""The capacity page: how many more standard guests fit, with and without N+1, why no more,
the 30-day trend, which nodes could sleep or wake, and the admin's "power down" (dashboard/
capacity.py has the figures and the checks, dashboard/power.py the power-downs, both shared
with the API)."""

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from .. import capacity, events, power
from ..errors import BadInput, Refused
from ..models import Cluster
from .ha import _listed

REASONS = {
    "memory": "no memory left (RAM less reserve)",
    "cpu": "no CPU left (threads × CPU overcommit)",
    "n1": "no room to recover a lost node (N+1)",
    "allowed": "not allowed there (HA rules)",
}


def why(limited_by: dict) -> list[str]:
    """How many nodes refused the next guest, per reason, in words: "no CPU left (…) on 12 nodes"."""
    return [f"{REASONS[r]} on {n} node{'s' if n != 1 else ''}" for r, n in limited_by.items() if n]


def _typed(cluster: Cluster, post) -> dict:
    """The form as the API's JSON would say it; every field that cannot be read is refused at once."""
    data: dict = {"standby": _listed(post.get("standby", ""))}
    errors: dict[str, list[str]] = {}
    for name in capacity.SIZE_NAMES:
        try:
            data[name] = capacity.parsed_size(name, post.get(name, ""))
        except Refused as exc:
            errors |= exc.errors
    try:
        data["idle_watts"] = float(post.get("idle_watts", ""))
    except ValueError:
        errors["idle_watts"] = [f"idle_watts: watts per idle node, between 0 and {capacity.MAX_WATTS:g}"]
    if errors:
        try:
            capacity.validated(cluster, data)
        except Refused as exc:
            errors = exc.errors | errors
        raise BadInput(errors)
    return data


@require_http_methods(["GET", "POST"])
@permission_required("dashboard.view_cluster", raise_exception=True)
def capacity_page(request, pk):
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    if request.method == "POST":
        if not request.user.has_perm("dashboard.change_policy"):
            raise PermissionDenied("your role lacks the permission dashboard.change_policy")
        try:
            capacity.save_settings(cluster.pk, _typed(cluster, request.POST), request.user)
        except Refused as exc:
            return _page(request, cluster, exc.errors, code=exc.status)
        messages.success(request, "Capacity settings saved.")
        return redirect("dashboard:capacity", pk)
    return _page(request, cluster)


POWER_ACTIONS = {"down": power.start, "standby": power.mark_standby}


@require_POST
@permission_required("dashboard.change_cluster", raise_exception=True)
def power_act(request, pk, what):
    """The page's "Power down" and "Mark standby" buttons; a refusal → the page with the reason."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    node = request.POST.get("node", "")
    try:
        if what not in POWER_ACTIONS:
            raise BadInput(f"action must be one of {', '.join(POWER_ACTIONS)}", field="action")
        POWER_ACTIONS[what](cluster, node, request.user)
    except Refused as exc:  # bad input (400) or not now (409), with why
        return _page(request, cluster, power_error=str(exc), code=exc.status)
    messages.success(request, f"{node}: powering down." if what == "down" else f"{node} is standby.")
    events.collect_wanted.send(Cluster, cluster_id=cluster.pk)
    return redirect("dashboard:capacity", pk)


POWER_CHECK_NODES = 100  # Proxmox clusters stay well under it


def _power_refused(cluster: Cluster, report: dict) -> dict[str, str]:
    """The suggested nodes whose power-down the N+1 check would refuse, with its reason. Each
    check is the N+1 verdict after the node's evacuation, and before it when that one fails
    (0.13 s at 100 nodes, 2.7 s at 1000): past `POWER_CHECK_NODES` nodes the page leaves it
    to the click."""
    snapshot = cluster.latest_snapshot()
    if snapshot is None or len(snapshot.nodes) > POWER_CHECK_NODES:
        return {}
    reasons = {node: power.breaks_n1(cluster, node) for node in report["power"]["power_off"]}
    return {node: reason for node, reason in reasons.items() if reason}


def _page(request, cluster: Cluster, errors: dict | None = None, power_error: str = "", code: int = 200):
    report = capacity.report(cluster)
    settings = capacity.as_dict(capacity.settings_of(cluster))
    form = {name: capacity.size_text(settings[name]) for name in capacity.SIZE_NAMES}
    form |= {"idle_watts": f"{settings['idle_watts']:g}", "standby": " ".join(settings["standby"])}
    if errors:
        form |= {name: request.POST.get(name, "") for name in form}
    if report:
        for row in report["sizes"]:
            row["why"], row["why_n1"] = why(row["limited_by"]), why(row["limited_by_n1"] or {})
        for line in report["trend"]:
            line["spark"] = capacity.sparkline(line["points"], "count")
            line["spark_n1"] = capacity.sparkline(line["points"], "count_n1")
            line["first"] = line["points"][0] if line["points"] else None
            line["last"] = line["points"][-1] if line["points"] else None
            line["low"] = min((p["count"] for p in line["points"]), default=None)
            line["high"] = max((p["count"] for p in line["points"]), default=None)
    labels = {name: f"{name} size" for name in capacity.SIZE_NAMES} | {
        "idle_watts": "idle power per node (W)",
        "standby": "standby nodes",
    }
    helps = dict.fromkeys(capacity.SIZE_NAMES, "cores and memory, e.g. 4c,8g (m, g, t)") | {
        "idle_watts": f"default {settings['idle_watts_default']:g} W",
        "standby": "powered down on purpose, first to wake first",
    }
    fields = [
        {"name": n, "label": labels[n], "value": v, "help": helps[n], "errors": (errors or {}).get(n, [])}
        for n, v in form.items()
    ]
    can_power = request.user.has_perm("dashboard.change_cluster") and not cluster.read_only
    context = {
        "cluster": cluster,
        "report": report,
        "fields": fields,
        "reserve_gib": report["memory_reserve_bytes"] / capacity.GIB if report else 0,
        "can_edit": request.user.has_perm("dashboard.change_policy"),
        "can_power": can_power,
        "power_refused": _power_refused(cluster, report) if report and can_power else {},
        "power_downs": power.status(cluster),
        "power_error": power_error,
        "spark": {"width": capacity.SPARK_WIDTH, "height": capacity.SPARK_HEIGHT},
        "idle_watts_default": settings["idle_watts_default"],
        "today": timezone.now().date().isoformat(),
    }
    return render(request, "dashboard/capacity.html", context, status=code)
