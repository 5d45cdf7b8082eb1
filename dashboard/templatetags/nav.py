"""The top navigation, the same on every page (templates/dashboard/nav.html)."""

from django import template

from dashboard.models import Cluster

register = template.Library()
NAMED = 6  # clusters named in the navigation; with more, the shown one and the overview's link


@register.inclusion_tag("dashboard/nav.html", takes_context=True)
def top_nav(context):
    """The clusters, the shown cluster's pages (the page's own cluster, else the first one), the
    audit trail, the clusters page (admins), the API tokens and docs; the page shown is marked by its URL name."""
    clusters = list(Cluster.objects.filter(archived=False).only("name"))
    shown = context.get("cluster")
    if not isinstance(shown, Cluster):
        shown = clusters[0] if clusters else None
    match = context["request"].resolver_match
    return {
        # Past a few clusters their names would fill a phone's screen: the overview lists them.
        "clusters": clusters if len(clusters) <= NAMED else [shown],
        "overview": len(clusters) > 1,
        "cluster": shown,
        "current": context.get("nav_current") or (match.url_name if match else ""),
        "can_configure": context["request"].user.has_perm("dashboard.change_cluster"),
    }
