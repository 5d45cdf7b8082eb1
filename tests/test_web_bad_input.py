"""A table of bad input for every form, API write and the snapshot upload: each is refused with
a message naming the field, and nothing stored changes."""

import json

import pytest
from conftest import policy_form
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dashboard.models import AuditEvent, Cluster, Migration, Policy

pytestmark = pytest.mark.django_db

FORM = "form"  # the settings form on the page
API = "api"  # the JSON settings API
REJECT = "reject"
IMPORT = "import"  # a snapshot file uploaded as a what-if cluster

BAD = [
    (FORM, {"threshold": 130}, "threshold must be between 0 and 100 %"),
    (FORM, {"threshold": "lots"}, "threshold must be a number"),
    (FORM, {"hold_duration": -1}, "hold duration must be between 0 and 1000 rounds"),
    (FORM, {"round_interval": 2.5}, "round interval must be a whole number"),
    (FORM, {"cooldown": "soon"}, "cooldown must be a whole number"),
    (FORM, {"rejection_memory": 99999}, "rejection memory must be between 0 and 10080 minutes"),
    (FORM, {"suggestion_expiry": 0}, "suggestion expiry must be between 1 and 10080 minutes"),
    (FORM, {"max_concurrent_migrations": 0}, "concurrent migrations must be between 1 and 100"),
    (FORM, {"mode": "fancy"}, "mode must be one of: basic, static, dynamic"),
    (FORM, {"automation": "yolo"}, "automation must be one of: manual, partial, automatic"),
    (FORM, {"automatic_margin": 5}, "automatic margin must be at least the margin"),
    (API, {"threshold": True}, "threshold must be a number"),
    (API, {"hold_duration": "3"}, "hold duration must be a number"),
    (API, {"mode": 3}, "mode must be a string"),
    (API, {"colour": "red"}, "colour is not a setting; the settings are: mode, automation, threshold"),
    (API, {"margin": 1e400}, "margin must be a number"),
    (API, {"cooldown": 10**30}, "cooldown must be between 0 and 10080 minutes"),
    (API, [1, 2], "the body must be a JSON object of settings"),
    (API, "not json", "the body must be a JSON object of settings"),
    (REJECT, {}, "reason is required: say why, for the audit trail"),
    (REJECT, {"reason": "x" * 501}, "reason must be at most 500 characters"),
    (IMPORT, {"name": "lab one!"}, "name may contain only letters, digits, - and _"),
    (IMPORT, {"snapshot": {"format": "crs-snapshot/1", "nodes": "many"}}, "snapshot: "),
]


def send(client, kind, data, cluster, migration):
    if kind == FORM:
        return client.post(reverse("dashboard:settings", args=[cluster.pk]), policy_form(**data))
    if kind == API:
        body = data if isinstance(data, str) else json.dumps(data)
        return client.post(reverse("dashboard:api-settings", args=[cluster.pk]), body, content_type="application/json")
    if kind == REJECT:
        return client.post(reverse("dashboard:reject", args=[migration.pk]), data)
    snapshot = json.dumps(data.get("snapshot", cluster.snapshot)).encode()
    upload = SimpleUploadedFile("lab.json", snapshot, content_type="application/json")
    return client.post(reverse("dashboard:import"), {"name": data.get("name", "lab"), "snapshot": upload})


def stored():
    """Everything a bad request could have changed."""
    return (
        list(Policy.objects.values()),
        list(Migration.objects.values("pk", "state", "reason")),
        list(Cluster.objects.values_list("pk", "name")),
        AuditEvent.objects.count(),
    )


@pytest.mark.parametrize("kind, data, message", BAD)
def test_bad_input_is_refused_naming_the_field_and_nothing_changes(admin_client, suggested, kind, data, message):
    before = stored()
    response = send(admin_client, kind, data, suggested.cluster, suggested)
    if kind == FORM:  # post/redirect/get: the refusal is shown at the form, after the redirect
        assert response.status_code == 302 and response["Location"].endswith("#settings")
        response = admin_client.get(response["Location"])
    else:
        assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert stored() == before
