"""The audit trail: the filters an admin narrows it by (the page and the API share them), newest first."""

from datetime import datetime, time, timedelta

from django import forms
from django.utils import timezone

from .forms import cluster_choice
from .models import AuditEvent, with_cluster


class AuditFilterForm(forms.Form):
    cluster = cluster_choice(empty_label="all clusters")
    actor = forms.CharField(
        max_length=150,
        required=False,
        help_text='A username, or "system" for rounds and workers.',
        error_messages={"max_length": "actor must be at most 150 characters"},
    )
    action = forms.ChoiceField(choices=[("", "all actions")] + [(a, a) for a in AuditEvent.ACTIONS], required=False)
    since = forms.DateField(
        required=False, label="From (date)", error_messages={"invalid": "from must be a date, YYYY-MM-DD"}
    )
    until = forms.DateField(
        required=False, label="To (date, inclusive)", error_messages={"invalid": "to must be a date, YYYY-MM-DD"}
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        allowed = ", ".join(AuditEvent.ACTIONS)
        self.fields["action"].error_messages["invalid_choice"] = f"action must be one of: {allowed}"

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("from must be on or before to")
        return data

    def events(self):
        """The events matching the valid filters, newest first."""
        events = with_cluster(AuditEvent.objects.all(), "migration")
        data = self.cleaned_data
        if data["cluster"]:
            events = events.filter(cluster=data["cluster"])
        if data["actor"] == "system":
            events = events.filter(actor_name="")
        elif data["actor"]:
            events = events.filter(actor_name=data["actor"])
        if data["action"]:
            events = events.filter(action=data["action"])
        zone = timezone.get_current_timezone()
        if data["since"]:
            events = events.filter(at__gte=datetime.combine(data["since"], time.min, zone))
        if data["until"]:
            events = events.filter(at__lt=datetime.combine(data["until"] + timedelta(days=1), time.min, zone))
        return events
