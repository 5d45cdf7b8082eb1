"""Edge validation: every message names the field and what it accepts (ranges live on the model)."""

from django import forms
from django.db import transaction

from .models import AuditEvent, Policy

POLICY_FIELDS = ["mode", "automation", "threshold", "hold_duration", "margin", "automatic_margin", "method",
                 "imbalance_scale", "round_interval"]


class PolicyForm(forms.ModelForm):
    class Meta:
        model = Policy
        fields = POLICY_FIELDS
        labels = {"threshold": "Threshold (%)", "margin": "Margin (%)", "automatic_margin": "Automatic margin (%)",
                  "hold_duration": "Hold duration (rounds)", "round_interval": "Round interval (seconds)",
                  "automation": "Automation level"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            label = name.replace("_", " ")
            field.error_messages["required"] = f"{label} is required"
            field.error_messages["invalid"] = f"{label} must be a number"
            if isinstance(field, forms.ChoiceField):
                allowed = ", ".join(str(value) for value, _ in field.choices if value != "")
                field.error_messages["invalid_choice"] = f"{label} must be one of: {allowed}"
            # Ranges are checked by the model's validators, whose messages name the field;
            # the form field's copies would say only "Ensure this value is greater than ...".
            field.validators = []

    def save_by(self, actor) -> Policy:
        """Save the settings and audit what changed, in one transaction."""
        changes = {name: [self.initial.get(name), self.cleaned_data[name]] for name in self.changed_data}
        with transaction.atomic():
            policy = self.save()
            AuditEvent.objects.create(actor=actor, action="settings-changed", cluster_id=policy.cluster_id,
                                      details={"changes": changes})
        return policy


class RejectForm(forms.Form):
    reason = forms.CharField(max_length=500, required=False, strip=True,
                             error_messages={"max_length": "reason must be at most 500 characters"})
