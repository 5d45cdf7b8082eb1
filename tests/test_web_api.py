"""The REST API (/api/v1/): tokens, roles, recommendations, settings, audit export, the schema."""

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from conftest import make_migration
from django.contrib.staticfiles import finders
from django.templatetags.static import static
from django.urls import reverse
from django.utils import timezone

from dashboard.models import AuditEvent, Cluster, Migration
from dashboard.tokens import ApiToken

pytestmark = pytest.mark.django_db


def bearer(user, name="script", expires_at=None):
    _, secret = ApiToken.objects.issue(user, name, expires_at)
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def test_schema_and_docs_are_readable_without_login(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/recommendations/{id}/approve/" in paths and "/api/v1/audit/export/csv/" in paths
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    body = docs.content.decode()
    assert "swagger-ui" in body and "cdn" not in body.lower()  # served from drf-spectacular-sidecar
    # No inline script (the pages' CSP, script-src 'self', blocks it): the UI's script is a file.
    assert not re.search(r"<script>\s*\S", body) and 'src="/api/docs/?script=' in body
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


def test_the_favicon_is_served(client):
    icon = client.get("/favicon.ico")  # browsers ask for it by themselves: not a 404
    assert (icon.status_code, icon["Location"]) == (301, static("favicon.svg"))
    assert finders.find("favicon.svg") and open(finders.find("favicon.svg")).read().startswith("<svg")


def test_no_login_is_a_json_401(client, cluster):
    response = client.get("/api/v1/clusters/")
    assert response.status_code == 401
    assert response.json()["detail"]


def test_a_token_is_shown_once_and_stored_hashed(client, operator):
    client.force_login(operator)
    created = client.post("/api/v1/tokens/", {"name": "backup script"}, content_type="application/json")
    assert created.status_code == 201, created.content
    secret = created.json()["token"]
    assert secret.startswith("crs_") and created.json()["prefix"] == secret[:12]
    token = ApiToken.objects.get(name="backup script")
    assert secret not in (token.digest, token.prefix) and len(token.digest) == 64
    assert token.expires_at > timezone.now() + timedelta(days=89)  # expires by default
    listed = client.get("/api/v1/tokens/").json()
    assert listed[0]["name"] == "backup script" and "token" not in listed[0]

    client.logout()
    assert client.get("/api/v1/migrations/", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_creating_and_revoking_a_token_is_audited_with_the_actor_never_the_secret(client, admin, operator):
    """Issue 38 item 12: both are security events; the page's and the API's alike."""
    client.force_login(admin)
    secret = client.post("/api/v1/tokens/", {"name": "for ops", "user": "operator"}, content_type="application/json")
    token = ApiToken.objects.get(name="for ops")
    client.delete(f"/api/v1/tokens/{token.pk}/")
    client.delete(f"/api/v1/tokens/{token.pk}/")  # already revoked: nothing more to audit
    client.post(reverse("dashboard:tokens"), {"name": "own", "days": 30})
    own = ApiToken.objects.get(name="own")
    client.post(reverse("dashboard:revoke-token", args=[own.pk]))
    events = AuditEvent.objects.order_by("pk").values_list("action", "actor_name", "details__user", "details__token")
    assert list(events) == [
        ("token-created", "admin", "operator", "for ops"),
        ("token-revoked", "admin", "operator", "for ops"),
        ("token-created", "admin", "admin", "own"),
        ("token-revoked", "admin", "admin", "own"),
    ]
    trail = json.dumps(list(AuditEvent.objects.values("details")))
    assert secret.json()["token"] not in trail and token.prefix in trail


def test_revoked_and_expired_tokens_are_refused(client, viewer, cluster):
    revoked = bearer(viewer, "old")
    assert client.get("/api/v1/clusters/", **revoked).status_code == 200
    client.force_login(viewer)
    pk = ApiToken.objects.get(name="old").pk
    assert client.delete(f"/api/v1/tokens/{pk}/").status_code == 204
    client.logout()
    response = client.get("/api/v1/clusters/", **revoked)
    assert response.status_code == 401 and "revoked" in response.json()["detail"]

    expired = bearer(viewer, "expired", timezone.now() - timedelta(seconds=1))
    assert client.get("/api/v1/clusters/", **expired).status_code == 401


def test_only_admins_create_tokens_for_others(client, admin, operator):
    client.force_login(operator)
    response = client.post("/api/v1/tokens/", {"name": "x", "user": "admin"}, content_type="application/json")
    assert response.status_code == 403
    client.force_login(admin)
    response = client.post("/api/v1/tokens/", {"name": "for op", "user": "operator"}, content_type="application/json")
    assert response.status_code == 201 and response.json()["user"] == "operator"
    assert ApiToken.objects.get(name="for op").user == operator
    unknown = client.post("/api/v1/tokens/", {"name": "x", "user": "no\x00body"}, content_type="application/json")
    assert unknown.status_code == 400 and list(unknown.json()) == ["user"]


def test_a_token_carries_its_users_role(client, viewer, suggested):
    response = client.post(f"/api/v1/recommendations/{suggested.pk}/approve/", **bearer(viewer))
    assert response.status_code == 403
    assert "dashboard.approve_migration" in response.json()["detail"]
    assert Migration.objects.get(pk=suggested.pk).state == "suggested"


def test_recommendations_list_and_approve(client, operator, suggested):
    auth = bearer(operator)
    listed = client.get(f"/api/v1/recommendations/?cluster={suggested.cluster_id}", **auth).json()
    assert [r["id"] for r in listed] == [suggested.pk]
    assert listed[0]["source"] == "node01" and listed[0]["imbalance_before"] == 0.5
    response = client.post(f"/api/v1/recommendations/{suggested.pk}/approve/", **auth)
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "approved" and response.json()["decided_by"] == "operator"
    late = client.post(f"/api/v1/recommendations/{suggested.pk}/reject/", {"reason": "x"}, **auth)
    assert late.status_code == 409 and "is approved" in late.json()["detail"]
    assert client.get("/api/v1/recommendations/", **auth).json() == []
    assert AuditEvent.objects.filter(action="approved", actor=operator, migration=suggested).exists()


def test_reject_needs_a_reason_and_names_the_field(client, operator, suggested):
    auth = bearer(operator)
    url = f"/api/v1/recommendations/{suggested.pk}/reject/"
    missing = client.post(url, {}, content_type="application/json", **auth)
    assert missing.status_code == 400 and "reason" in missing.json()
    response = client.post(url, {"reason": "backup window"}, content_type="application/json", **auth)
    assert response.status_code == 200 and response.json()["state"] == "rejected"
    assert response.json()["reason"] == "backup window"


def test_approve_all_approves_every_pending_recommendation(client, operator, suggested):
    response = client.post(f"/api/v1/clusters/{suggested.cluster_id}/recommendations/approve-all/", **bearer(operator))
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["approved"]] == [suggested.pk] and response.json()["refused"] == {}


def test_settings_read_and_change_with_the_models_validation(client, admin, operator, cluster):
    url = f"/api/v1/clusters/{cluster.pk}/settings/"
    current = client.get(url, **bearer(operator)).json()
    assert current["threshold"] == cluster.policy.threshold and current["automation"] == "manual"
    refused = client.patch(url, {"threshold": 30}, content_type="application/json", **bearer(operator))
    assert refused.status_code == 403

    auth = bearer(admin)
    bad = client.patch(url, {"mode": "fast"}, content_type="application/json", **auth)
    assert bad.status_code == 400 and list(bad.json()) == ["mode"] and "mode must be one of" in bad.json()["mode"][0]
    typed = client.patch(url, {"hold_duration": "3", "colour": 1}, content_type="application/json", **auth)
    assert typed.json() == {
        "hold_duration": ["hold duration must be a number"],
        "colour": [f"colour is not a setting; the settings are: {', '.join(current)}"],
    }
    below = client.patch(
        url, {"margin": current["automatic_margin"] * 2}, content_type="application/json", **auth
    )  # the model's rule: automatic margin ≥ margin
    assert below.status_code == 400 and "automatic margin" in str(below.json())
    good = client.patch(url, {"method": "topsis"}, content_type="application/json", **auth)
    assert good.status_code == 200 and good.json()["method"] == "topsis"
    event = AuditEvent.objects.get(action="settings-changed")
    assert event.actor == admin and event.details["changes"] == {"method": ["bruteforce", "topsis"]}


def test_settings_speak_seconds_in_and_out_and_every_bad_field_is_named_at_once(client, admin, cluster):
    url, auth = f"/api/v1/clusters/{cluster.pk}/settings/", bearer(admin)
    changed = client.patch(url, {"cooldown": 1800}, content_type="application/json", **auth)
    assert changed.status_code == 200 and changed.json()["cooldown"] == 1800
    assert client.get(url, **auth).json()["cooldown"] == 1800 and isinstance(changed.json()["memory_reserve"], int)
    three = {"threshold": 7, "hold_duration": "3", "mode": "fast"}
    bad = client.patch(url, three, content_type="application/json", **auth)
    assert bad.status_code == 400 and sorted(bad.json()) == ["hold_duration", "mode", "threshold"]
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()["components"]["schemas"]["Settings"]
    cooldown = schema["properties"]["cooldown"]
    assert cooldown["type"] == "number" and "seconds" in cooldown["description"]


def test_the_api_docs_group_operations_by_what_they_act_on_and_lead_back_to_the_dashboard(client):
    """Issue 38 item 13: 85 operations sat in one "v1" group, and the docs had no way back."""
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    tags = {tag for path in schema["paths"].values() for operation in path.values() for tag in operation["tags"]}
    assert {"clusters", "recommendations", "migrations", "settings", "maintenance", "HA", "capacity", "tokens"} <= tags
    assert "v1" not in tags
    assert "[← Back to the dashboard](/)" in schema["info"]["description"]


def test_lift_all_leaves_a_clusters_own_stop_and_each_audit_row_says_which(client, operator, cluster):
    """Issue 38 item 1: stop one cluster, Stop all, Lift all: the one cluster's own stop holds."""
    other = Cluster.objects.create(name="other", source_kind="simulator")
    auth, here, everywhere = (
        bearer(operator),
        f"/api/v1/clusters/{cluster.pk}/emergency-stop/",
        "/api/v1/clusters/emergency-stop/",
    )
    own = client.post(here, {"stop": True}, content_type="application/json", **auth).json()["clusters"][0]
    assert own["stopped"] and own["stop"]["here"] and not own["stop"]["all"] and own["stop"]["by"] == "operator"
    client.post(everywhere, {"stop": True}, content_type="application/json", **auth)
    both = client.get(reverse("api:cluster-state", args=[cluster.pk]), **auth).json()
    assert both["stop"] | {"at": None} == {"here": True, "all": True, "by": "operator", "at": None}
    assert both["stop"]["at"] == own["stop"]["at"]  # the stop that paused it first
    lifted = client.post(everywhere, {"stop": False}, content_type="application/json", **auth).json()["clusters"]
    assert {c["name"]: (c["stopped"], c["stop"]["here"], c["stop"]["all"]) for c in lifted} == {
        "test": (True, True, False),
        "other": (False, False, False),
    }
    assert Cluster.objects.get(pk=cluster.pk).stopped and not Cluster.objects.get(pk=other.pk).stopped
    rows = AuditEvent.objects.filter(cluster=cluster).order_by("pk").values_list("action", "details__scope")
    # Stop all on the already stopped cluster is audited too, and every row names its stop.
    assert list(rows) == [("emergency-stop", "here"), ("emergency-stop", "all"), ("emergency-stop-lifted", "all")]
    client.force_login(operator)
    page = client.get(reverse("dashboard:audit")).content.decode()
    assert page.count("Stop all: every cluster's shared stop") == 4 and "this cluster's own stop" in page


def test_every_action_of_the_page_works_with_a_token(client, operator, suggested):
    auth, cluster = bearer(operator), suggested.cluster
    url = f"/api/v1/clusters/{cluster.pk}/emergency-stop/"
    stopped = client.post(url, {}, content_type="application/json", **auth).json()["clusters"]
    assert [(c["id"], c["name"], c["stopped"]) for c in stopped] == [(cluster.pk, cluster.name, True)]
    lifted = client.post(url, {"stop": False}, content_type="application/json", **auth).json()["clusters"]
    assert [c["stopped"] for c in lifted] == [False]
    actions = AuditEvent.objects.order_by("pk").values_list("action", flat=True)
    assert list(actions) == ["emergency-stop", "emergency-stop-lifted"]
    not_running = client.post(f"/api/v1/migrations/{suggested.pk}/fail/", **auth)
    assert not_running.status_code == 409 and "not running" in not_running.json()["detail"]
    Migration.objects.filter(pk=suggested.pk).update(state="running", started_at=timezone.now())
    failed = client.post(f"/api/v1/migrations/{suggested.pk}/fail/", **auth)
    assert failed.status_code == 200 and failed.json()["state"] == "failed"
    assert AuditEvent.objects.filter(action="failed", actor=operator, migration=suggested.pk).exists()


def test_recommendations_are_listed_in_plan_order(client, operator, suggested):
    Migration.objects.filter(pk=suggested.pk).update(plan=1, step=0)
    later = make_migration(suggested.cluster, "suggested", "ct:900", plan=2, step=1, after=0)
    first = make_migration(suggested.cluster, "suggested", "ct:901", plan=2, step=0)
    listed = [m["id"] for m in client.get("/api/v1/recommendations/", **bearer(operator)).json()]
    assert listed == [suggested.pk, first.pk, later.pk]


def test_nodes_and_guests_come_from_the_latest_snapshot(client, viewer, collected, cluster):
    auth = bearer(viewer)
    nodes = client.get(f"/api/v1/clusters/{collected.pk}/nodes/", **auth).json()
    assert [n["name"] for n in nodes] == [n["name"] for n in collected.snapshot["nodes"]]
    guests = client.get(f"/api/v1/clusters/{collected.pk}/guests/", **auth).json()
    assert {g["sid"] for g in guests} == {g["sid"] for g in collected.snapshot["guests"]}


def test_rounds_are_paged_and_filtered_by_time(client, viewer, cluster):
    from dashboard.models import Round

    now = timezone.now()
    for minutes in range(5):
        Round.objects.create(
            cluster=cluster,
            at=now - timedelta(minutes=minutes),
            imbalance=0.3,
            threshold=0.3,
            decision="holding",
            hold_count=1,
            explanation={},
            node_usage={},
        )
    auth = bearer(viewer)
    since = (now - timedelta(minutes=2, seconds=30)).isoformat()
    page = client.get("/api/v1/rounds/", {"since": since, "page_size": 2}, **auth).json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    bad = client.get("/api/v1/rounds/", {"since": "yesterday"}, **auth)
    assert bad.status_code == 400 and "since" in bad.json()


def test_audit_trail_exports_csv_and_json_with_filters(client, viewer, operator, suggested):
    client.force_login(operator)
    client.post(
        f"/api/v1/recommendations/{suggested.pk}/reject/", {"reason": "not now"}, content_type="application/json"
    )
    client.logout()
    auth = bearer(viewer)
    rows = list(
        csv.reader(io.StringIO(b"".join(client.get("/api/v1/audit/export/csv/", **auth).streaming_content).decode()))
    )
    assert rows[0] == ["at", "actor", "action", "cluster", "migration", "details"]
    assert [r[1:3] for r in rows[1:]] == [["operator", "rejected"]]
    exported = client.get("/api/v1/audit/export/json/", {"action": "rejected"}, **auth).json()
    assert exported[0]["details"]["reason"] == "not now"
    assert client.get("/api/v1/audit/", {"actor": "system"}, **auth).json()["count"] == 0
    bad = client.get("/api/v1/audit/", {"action": "exploded"}, **auth)
    assert bad.status_code == 400 and "action must be one of" in bad.json()["action"][0]


def test_session_writes_need_csrf(admin, cluster):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    response = client.patch(
        f"/api/v1/clusters/{cluster.pk}/settings/", {"method": "topsis"}, content_type="application/json"
    )
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]


def test_the_tokens_page_creates_shows_once_and_revokes(client, viewer, cluster):
    client.force_login(viewer)
    created = client.post("/tokens/", {"name": "grafana", "days": "30"})
    assert created.status_code == 200 and "no-store" in created["Cache-Control"]
    secret = created.context["secret"]
    assert secret in created.content.decode()
    token = ApiToken.objects.get(name="grafana")
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    listed = client.get("/tokens/").content.decode()
    assert "grafana" in listed and token.prefix in listed and secret not in listed
    assert client.post("/tokens/", {"name": "", "days": "0"}).status_code == 400
    client.post(f"/tokens/{token.pk}/revoke")
    client.logout()
    assert client.get("/api/v1/clusters/", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 401


def test_round_filters_take_any_offset_python_reads(client, viewer, cluster):
    """Found by schemathesis: PostgreSQL refuses offsets beyond ±15:59 that ISO 8601 parsing accepts."""
    auth = bearer(viewer)
    assert client.get("/api/v1/rounds/", {"until": "7795-06-07T12:37:43.230-20:19"}, **auth).status_code == 200
    late = client.get("/api/v1/rounds/", {"since": "9999-12-31T23:59:00-20:00"}, **auth)
    assert late.status_code == 400 and "since is out of range" in str(late.json())


# The page's old session paths, for one release: (method, old, new, body, status of the new path).
MOVED = [
    ("get", "/api/clusters/{c}/", "/api/v1/clusters/{c}/state/", {"rounds": "1"}, 200),
    ("post", "/api/clusters/{c}/settings", "/api/v1/clusters/{c}/settings/", {"threshold": 0.25}, 200),
    ("post", "/api/clusters/{c}/approve-all", "/api/v1/clusters/{c}/recommendations/approve-all/", None, 200),
    ("post", "/api/clusters/{c}/emergency-stop", "/api/v1/clusters/{c}/emergency-stop/", {"stop": True}, 200),
    ("post", "/api/emergency-stop", "/api/v1/clusters/emergency-stop/", {"stop": True}, 200),
    ("post", "/api/migrations/{m}/approve", "/api/v1/recommendations/{m}/approve/", None, 200),
    ("post", "/api/migrations/{m}/reject", "/api/v1/recommendations/{m}/reject/", {"reason": "not today"}, 200),
    ("post", "/api/migrations/{m}/fail", "/api/v1/migrations/{m}/fail/", None, 409),  # it is not running
]


@pytest.mark.parametrize("method, old, new, body, status", MOVED, ids=[m[1] for m in MOVED])
def test_an_old_session_path_answers_308_to_its_api_v1_home_keeping_the_method(
    client, admin_client, suggested, method, old, new, body, status
):
    old, new = (path.format(c=suggested.cluster_id, m=suggested.pk) for path in (old, new))
    query = "?rounds=1" if method == "get" else ""
    moved = getattr(client, method)(old + query)  # anonymous, no CSRF token: the new path asks for both
    assert moved.status_code == 308 and moved["Location"] == new + query
    data = {} if body is None else body if method == "get" else json.dumps(body)
    answer = getattr(admin_client, method)(old, data, content_type="application/json", follow=True)
    assert answer.redirect_chain == [(new + query, 308)]
    assert answer.status_code == status, answer.content  # a GET at a POST-only path would be a 405
    if "settings" in old:
        assert answer.json()["threshold"] == 0.25
    if "reject" in old:
        assert Migration.objects.get(pk=suggested.pk).reason == "not today"
