"""The list endpoints' query filters, as Django forms: a bad filter is refused with the field named,
and the schema's parameters are read off the same forms (the audit trail's is audit.AuditFilterForm)."""

from datetime import UTC

from django import forms

from .. import history, outcomes
from ..forms import cluster_choice
from ..live import sender as live
from ..models import (
    Migration,
)


class RoundFilterForm(forms.Form):
    cluster = cluster_choice()
    since = forms.DateTimeField(
        required=False, help_text="ISO 8601; from this time on.", error_messages={"invalid": "since must be ISO 8601"}
    )
    until = forms.DateTimeField(
        required=False, help_text="ISO 8601; before this time.", error_messages={"invalid": "until must be ISO 8601"}
    )

    def clean(self):
        super().clean()
        data = self.cleaned_data
        for name in ("since", "until"):  # in UTC: PostgreSQL refuses offsets Python accepts (e.g. -20:19)
            if data.get(name):
                try:
                    data[name] = data[name].astimezone(UTC)
                except OverflowError:
                    self.add_error(name, f"{name} is out of range once in UTC")
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError({"until": "until must be on or after since"})
        return data


class MigrationFilterForm(forms.Form):
    cluster = cluster_choice()
    state = forms.ChoiceField(
        choices=[("", "any")] + [(s, s) for s in Migration.STATES],
        required=False,
        error_messages={"invalid_choice": f"state must be one of: {', '.join(Migration.STATES)}"},
    )


class OutcomeFilterForm(forms.Form):
    days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=366,
        help_text=f"Days back; default {outcomes.SUMMARY_DAYS}.",
        error_messages={
            "invalid": "days must be a whole number",
            "min_value": "days must be between 1 and 366",
            "max_value": "days must be between 1 and 366",
        },
    )


class HistoryRangeForm(forms.Form):
    range = forms.ChoiceField(
        choices=[(name, name) for name in history.RANGES],
        required=False,
        help_text="How far back: 3h (default), 24h, 7d, 30d or 90d.",
        error_messages={"invalid_choice": f"range must be one of: {', '.join(history.RANGES)}"},
    )

    def clean_range(self) -> str:
        return self.cleaned_data["range"] or "3h"


class RoundsShownForm(forms.Form):
    rounds = forms.CharField(
        required=False,
        help_text=f"Only the last N rounds (the page asks for 1); the default and most: {live.ROUNDS_SHOWN}.",
    )

    def clean_rounds(self) -> int:
        given = self.cleaned_data["rounds"]
        if not given:
            return live.ROUNDS_SHOWN
        if not (given.isascii() and given.isdigit() and 1 <= int(given) <= live.ROUNDS_SHOWN):  # not "٣", not "1.5"
            raise forms.ValidationError(f"rounds must be a whole number from 1 to {live.ROUNDS_SHOWN}, not {given!r}")
        return int(given)
