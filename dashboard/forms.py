"""Edge validation: every message names the field and what it accepts (ranges live on the model)."""

from django import forms
from django.db import transaction

from .models import AuditEvent, Policy

POLICY_FIELDS = [
    "mode",
    "automation",
    "threshold",
    "hold_duration",
    "margin",
    "automatic_margin",
    "method",
    "imbalance_scale",
    "round_interval",
    "cooldown",
    "rejection_memory",
    "suggestion_expiry",
    "max_concurrent_migrations",
]


class PolicyForm(forms.ModelForm):
    class Meta:
        model = Policy
        fields = POLICY_FIELDS
        labels = {
            "threshold": "Threshold (%)",
            "margin": "Margin (%)",
            "automatic_margin": "Automatic margin (%)",
            "hold_duration": "Hold duration (rounds)",
            "round_interval": "Round interval (seconds)",
            "automation": "Automation level",
            "cooldown": "Cooldown (minutes)",
            "rejection_memory": "Rejection memory (minutes)",
            "suggestion_expiry": "Suggestion expiry (minutes)",
            "max_concurrent_migrations": "Concurrent migrations (at most)",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            label = name.replace("_", " ")
            field.error_messages["required"] = f"{label} is required"
            whole = isinstance(field, forms.IntegerField) and not isinstance(field, forms.FloatField)
            kind = "a whole number" if whole else "a number"
            field.error_messages["invalid"] = f"{label} must be {kind}"
            if isinstance(field, forms.ChoiceField):
                allowed = ", ".join(str(value) for value, _ in field.choices if value != "")
                field.error_messages["invalid_choice"] = f"{label} must be one of: {allowed}"
            # Ranges are checked by the model's validators, whose messages name the field;
            # the form field's copies would say only "Ensure this value is greater than ...".
            field.validators = []

    def save_by(self, actor) -> Policy:
        """Save the settings and audit what changed, in one transaction."""
        changes = {name: [self.initial.get(name), self.cleaned_data[name]] for name in self.changed_data}
        if not changes:
            return self.instance  # nothing changed: no event, and the hold counter goes on
        with transaction.atomic():
            policy = self.save()
            AuditEvent.objects.create(
                actor=actor, action="settings-changed", cluster_id=policy.cluster_id, details={"changes": changes}
            )
        return policy


def json_type_errors(data: dict) -> dict:
    """The JSON API's own refusals, before the form's: unknown names, and values of the wrong
    JSON type, which a form would quietly coerce (true → 1, "30" → 30)."""
    errors = {}
    fields = PolicyForm.base_fields
    for name, value in data.items():
        if name not in fields:
            message = f"{name} is not a setting; the settings are: {', '.join(POLICY_FIELDS)}"
        elif isinstance(fields[name], forms.ChoiceField) and not isinstance(value, str):
            message = f"{name.replace('_', ' ')} must be a string"
        elif not isinstance(fields[name], forms.ChoiceField) and (
            isinstance(value, bool) or not isinstance(value, int | float)
        ):
            message = f"{name.replace('_', ' ')} must be a number"
        else:
            continue
        errors[name] = [{"message": message, "code": "invalid"}]
    return errors


class RejectForm(forms.Form):
    # Required: the audit trail must say why, and rejection memory keeps the move away meanwhile.
    reason = forms.CharField(
        max_length=500,
        strip=True,
        error_messages={
            "required": "reason is required: say why, for the audit trail",
            "max_length": "reason must be at most 500 characters",
        },
    )
