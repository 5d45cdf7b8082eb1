"""`{{ fraction|percent }}` for server-rendered pages: the settings form's percent conversion, reused."""

from django import template

from dashboard.forms import PercentField

register = template.Library()
PERCENT = PercentField()


@register.filter
def percent(fraction) -> str:
    """0.4213 → "42.1 %", as the live page's JavaScript shows a measured fraction."""
    return "–" if fraction is None else f"{PERCENT.shown(fraction):.1f} %"


@register.filter
def signed_percent(fraction) -> str:
    """A relative change: −0.18 → "−18.0 %", 0.02 → "+2.0 %" (the outcome summary)."""
    if fraction is None:
        return "–"
    shown = PERCENT.shown(fraction)
    return f"{'−' if shown < 0 else '+'}{abs(shown):.1f} %"
