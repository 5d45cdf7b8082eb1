"""The top navigation, the same on every page (templates/dashboard/nav.html)."""

from django import template

from dashboard.models import Cluster

register = template.Library()


@register.inclusion_tag("dashboard/nav.html", takes_context=True)
def top_nav(context):
    """The clusters, the shown cluster's pages (the page's own cluster, else the first one), the
    audit trail, the clusters page (admins), the API tokens and docs; the page shown is marked by its URL name."""
    clusters = list(Cluster.objects.filter(archived=False).only("name"))
    shown = context.get("cluster")
    if not isinstance(shown, Cluster):
        shown = clusters[0] if clusters else None
    match = context["request"].resolver_match
    can_configure = context["request"].user.has_perm("dashboard.change_cluster")
    current = match.url_name if match else ""
    return {"clusters": clusters, "cluster": shown, "current": current, "can_configure": can_configure}
