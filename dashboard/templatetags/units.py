"""`{{ fraction|percent }}` for server-rendered pages: the settings form's percent conversion, reused."""

from django import template

from dashboard.forms import PercentField

register = template.Library()
PERCENT = PercentField()


@register.filter
def percent(fraction) -> str:
    """0.4213 → "42.1 %", as the live page's JavaScript shows a measured fraction."""
    return "–" if fraction is None else f"{PERCENT.shown(fraction):.1f} %"
