"""The rules page: a cluster's HA rules with why any is dropped, their editing (simulated and
imported clusters), and the guests opted out of automatic rebalancing. Checks and the audit
trail are dashboard/ha.py's, shared with the admin and the API."""

import re

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from .. import ha
from ..errors import Refused
from ..models import Cluster, HaRule

SEPARATORS = re.compile(r"[\s,]+")


def _listed(text: str) -> list[str]:
    """ "vm:101, vm:102" or "node1:2 node2" (as rules.cfg writes them) → the entries."""
    return [item for item in SEPARATORS.split(text.strip()) if item]


def _typed(post) -> dict:
    """What the form sent, as the API's JSON would say it (ha.validated checks it all)."""
    return {
        "rule": post.get("rule", "").strip(),
        "type": post.get("type", ""),
        "resources": _listed(post.get("resources", "")),
        "nodes": _listed(post.get("nodes", "")) if post.get("type") == "node-affinity" else [],
        "strict": post.get("strict") == "on",
        "affinity": post.get("affinity", "positive"),
    }


def _node_text(entry: dict, affinity: str | None) -> str:
    """A rule's node as rules.cfg writes it; a negative rule's carry no priority."""
    return entry["node"] if affinity == "negative" else f"{entry['node']}:{entry['priority']}"


def _page(request, cluster, status=200, errors=None, typed=None, **extra):
    """The page; after a refused edit, the form that was sent shows what was typed and why."""
    state = ha.rules_state(cluster)
    snapshot = cluster.latest_snapshot()
    for rule in state["rules"]:
        values = {
            "rule": rule["id"],
            "type": rule["type"],
            "resources": " ".join(rule["resources"]),
            "nodes": " ".join(_node_text(n, rule.get("affinity")) for n in rule.get("nodes", [])),
            "strict": rule.get("strict", False),
            "affinity": rule.get("affinity", "positive"),
        }
        rule["nodes_text"] = values["nodes"]
        sent = typed is not None and typed.get("pk") == rule["pk"]
        rule["form"], rule["errors"] = (typed, errors) if sent else (values, None)
    sent = typed is not None and typed.get("pk") is None
    context = {
        "cluster": cluster,
        "state": state,
        "can_edit": state["editable"] and request.user.has_perm("dashboard.change_policy"),
        "can_opt_out": request.user.has_perm("dashboard.change_policy"),
        "guests": [g.sid for g in snapshot.guests] if snapshot else [],
        "nodes": [n.name for n in snapshot.nodes] if snapshot else [],
        "types": HaRule.TYPES,
        "affinities": HaRule.AFFINITIES,
        "new_form": typed if sent else {"type": "node-affinity", "affinity": "positive"},
        "new_errors": errors if sent else None,
        **extra,
    }
    return render(request, "dashboard/rules.html", context, status=status)


@require_GET
@permission_required("dashboard.view_cluster", raise_exception=True)
def rules_page(request, pk):
    return _page(request, get_object_or_404(Cluster.objects.select_related("policy"), pk=pk))


@require_POST
@permission_required("dashboard.change_policy", raise_exception=True)
def save_rule(request, pk, rule=None):
    """A new or changed rule; refused with the page and its reasons (4xx), what was typed kept."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    instance = get_object_or_404(HaRule, pk=rule, cluster=cluster) if rule is not None else None
    data = _typed(request.POST)
    try:
        saved = ha.save_rule(cluster.pk, data, instance, request.user)
    except Refused as exc:
        typed = {**request.POST.dict(), "strict": request.POST.get("strict") == "on", "pk": rule}
        return _page(request, cluster, exc.status, errors=exc.errors, typed=typed)
    messages.success(request, f"Rule {saved.rule} saved: the next round applies it.")
    return redirect("dashboard:rules", pk)


@require_POST
@permission_required("dashboard.change_policy", raise_exception=True)
def delete_rule(request, pk, rule):
    cluster = get_object_or_404(Cluster, pk=pk)
    instance = HaRule.objects.filter(pk=rule, cluster=cluster).first()
    if instance is not None:  # deleted already (a second click): nothing to do
        ha.delete_rule(instance, request.user)
        messages.success(request, f"Rule {instance.rule} deleted.")
    return redirect("dashboard:rules", pk)


@require_POST
@permission_required("dashboard.change_policy", raise_exception=True)
def opt_out(request, pk):
    """Opt a guest out of automatic rebalancing (`opt_out=1`) or back in (`opt_out=0`)."""
    cluster = get_object_or_404(Cluster.objects.select_related("policy"), pk=pk)
    choice = request.POST.get("opt_out", "")
    if choice not in ("0", "1"):
        return _page(request, cluster, 400, opt_errors={"opt_out": ["opt_out must be 1 (opt out) or 0 (opt back in)"]})
    guest = request.POST.get("guest", "").strip()
    try:
        ha.set_opt_out(cluster.pk, guest, choice == "1", request.user)
    except Refused as exc:
        return _page(request, cluster, exc.status, opt_errors=exc.errors, typed_guest=guest)
    messages.success(request, f"{guest} {'opted out of' if choice == '1' else 'back in'} automatic rebalancing.")
    return redirect("dashboard:rules", pk)
