"""The engine's codes in words on server-rendered pages, from dashboard/wording.py."""

from django import forms, template
from django.utils.html import json_script

from dashboard import wording

register = template.Library()


@register.filter
def decision_words(code: str) -> str:
    """`{{ result.decision|decision_words }}`: "below-margin" → "No move gains enough: …"."""
    return wording.decision_words(code)


@register.simple_tag
def decision_table():
    """The decision and recommendation-kind words as JSON in the page (<script id="decision-words">
    and <script id="kind-words">) for dashboard.js."""
    return json_script(wording.DECISIONS, "decision-words") + json_script(wording.KINDS, "kind-words")


@register.filter
def setting_value(field: forms.BoundField) -> str:
    """A setting as a viewer reads it: a choice in words, a number as the form shows it (its unit is in the label)."""
    value = field.value()
    if isinstance(field.field, forms.ChoiceField):
        return dict(field.field.choices).get(value, value)  # type: ignore[arg-type]  # a list once set
    return "–" if value in (None, "") else str(value)


LONG_CHOICE = 32  # characters: past this a choice's words do not fit one column of the form's grid (19em)


@register.filter
def long_choices(field: forms.BoundField) -> bool:
    """A choice field whose words are long ("on: also the next hour's forecast peaks"): its field
    takes two columns of the form's grid where there are two, or its select shows the choice cut off."""
    choices = getattr(field.field, "choices", None) or []
    return any(len(str(label)) > LONG_CHOICE for _, label in choices)
