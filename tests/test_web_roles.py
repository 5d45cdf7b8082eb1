"""Who may do what: anonymous, outsider (no role), viewer, operator and admin, for every page,
API write and the WebSocket; and CSRF on every write."""

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from conftest import policy_form
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from dashboard.models import AuditEvent, Migration, Policy
from project.asgi import application

# Reads: every role sees them, nobody else.
READS = [
    "dashboard:home",
    "dashboard:cluster",
    "api:cluster-state",
    "dashboard:audit",
    "dashboard:export",
    "dashboard:plan",
]
# Writes, with the lowest role that may make them (the import form with its import).
WRITES = {
    "settings": "admin",
    "api-settings": "admin",
    "approve": "operator",
    "reject": "operator",
    "import-form": "admin",
}
ROLES = ["viewer", "operator", "admin"]
RANK = {role: rank for rank, role in enumerate(ROLES)}


# The short names above, as routes: the page's JSON lives in /api/v1/.
ROUTES = {
    "api-settings": "api:cluster-policy",
    "approve": "api:recommendation-approve",
    "reject": "api:recommendation-reject",
}


def url(name: str, cluster, migration) -> str:
    if name in ("dashboard:audit", "dashboard:import-form", "dashboard:home"):
        return reverse(name)
    if name in ("api:recommendation-approve", "api:recommendation-reject"):
        return reverse(name, args=[migration.pk])
    return reverse(name, args=[cluster.pk])


def write(client, name: str, cluster, migration):
    target = url(ROUTES.get(name, f"dashboard:{name}"), cluster, migration)
    if name == "import-form":
        return client.get(target)
    if name == "api-settings":
        return client.post(target, json.dumps({"threshold": 0.2}), content_type="application/json")
    if name == "settings":
        return client.post(target, policy_form(threshold=20))
    return client.post(target, {"reason": "not in office hours"})


@pytest.fixture
def users(admin, operator, viewer, outsider):
    return {"admin": admin, "operator": operator, "viewer": viewer, "outsider": outsider}


@pytest.mark.django_db
@pytest.mark.parametrize("name", READS)
def test_every_role_reads_outsiders_and_anonymous_do_not(client, users, suggested, name):
    target = url(name, suggested.cluster, suggested)
    anonymous = client.get(target)
    assert anonymous.status_code == (401 if "api" in name else 302)
    for role, user in users.items():
        client.force_login(user)
        assert client.get(target).status_code == (403 if role == "outsider" else 200), (role, name)


@pytest.mark.django_db
@pytest.mark.parametrize("name, lowest", WRITES.items())
@pytest.mark.parametrize("role", ["anonymous", "outsider"] + ROLES)
def test_writes_need_the_role(client, users, suggested, name, lowest, role):
    if role != "anonymous":
        client.force_login(users[role])
    response = write(client, name, suggested.cluster, suggested)
    allowed = role in RANK and RANK[role] >= RANK[lowest]
    if allowed:
        assert response.status_code in (200, 302), response.content
    else:
        pages = ("settings", "import-form")  # pages send the anonymous to the login, the API answers 401
        refused = 302 if (role == "anonymous" and name in pages) else 401 if role == "anonymous" else 403
        assert response.status_code == refused
        assert Policy.objects.get(cluster=suggested.cluster).threshold == 0.3
        assert Migration.objects.get(pk=suggested.pk).state == "suggested"
        assert not AuditEvent.objects.exists()


def test_every_route_needs_a_login_but_login_and_healthz(db, client):
    """A route added later is covered too: the middleware guards it unless it opts out."""
    public = {
        "/healthz",
        "/accounts/login/",
        "/accounts/logout/",
        "/api/schema/",  # the API's schema and docs describe, they hold no data
        "/api/docs/",
        "/metrics",  # guarded by its allow-list and token instead (test_web_metrics.py)
        "/favicon.ico",  # the pages' icon, which browsers ask for before anyone logs in
    }
    checked = 0
    for path in _concrete_paths(get_resolver()):
        if path in public or path.startswith("/admin/"):
            continue
        response = client.get(path)
        if response.status_code == 308:  # an old path of the page's JSON: /api/v1/ guards it
            assert response["Location"].startswith("/api/v1/"), path
            continue
        if response.status_code == 405:
            response = client.post(path)
        assert response.status_code in (302, 401), path
        if response.status_code == 302:
            assert response["Location"].startswith("/accounts/login/"), path
        checked += 1
    assert checked >= 9


def _concrete_paths(resolver, prefix=""):
    """Every route with its converters filled in by 1 (a cluster or migration id)."""
    for pattern in resolver.url_patterns:
        route = prefix + str(pattern.pattern).replace("<int:pk>", "1").replace("<int:cluster_id>", "1")
        if isinstance(pattern, URLResolver):
            yield from _concrete_paths(pattern, route)
        elif isinstance(pattern, URLPattern) and "<" not in route and "^" not in route:
            yield "/" + route


@pytest.mark.django_db
@pytest.mark.parametrize("name", [name for name in WRITES if name != "import-form"])
def test_every_write_refuses_a_request_without_csrf_token(admin, suggested, name):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    response = write(client, name, suggested.cluster, suggested)
    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert Migration.objects.get(pk=suggested.pk).state == "suggested"
    assert Policy.objects.get(cluster=suggested.cluster).threshold == 0.3


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_page_offers_no_control_the_role_cannot_use(client, users, suggested, role):
    client.force_login(users[role])
    body = client.get("/").content.decode()
    assert f'"can_decide": {"false" if role == "viewer" else "true"}' in body
    assert 'id="settings-form"' not in body and 'id="save-settings"' not in body
    assert 'id="settings-values"' in body and "Only an admin may change the settings." in body
    assert 'id="import-link"' not in body


@pytest.mark.django_db
def test_read_only_what_if_cluster_offers_no_decision(client, admin, suggested):
    suggested.cluster.source_kind = "snapshot"  # an imported what-if cluster
    suggested.cluster.save()
    client.force_login(admin)
    body = client.get(reverse("dashboard:cluster", args=[suggested.cluster.pk])).content.decode()
    assert '"can_decide": false' in body and "what-if, read-only" in body


@pytest.mark.django_db
def test_roles_are_groups_with_permissions():
    from django.contrib.auth.models import Group

    perms = {g.name: {p.codename for p in g.permissions.all()} for g in Group.objects.all()}
    assert "approve_migration" not in perms["viewer"] and "change_policy" not in perms["viewer"]
    assert "approve_migration" in perms["operator"] and "change_policy" not in perms["operator"]
    assert {"approve_migration", "change_policy", "add_cluster", "view_auditevent"} <= perms["admin"]


ORIGIN = (b"origin", b"http://127.0.0.1")


def session_cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()


async def close_code(cluster, headers) -> int | None:
    communicator = WebsocketCommunicator(application, f"/ws/clusters/{cluster.pk}/", headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    output = {}
    if connected and not await communicator.receive_nothing(0.2):
        output = await communicator.receive_output(timeout=2)
    await communicator.disconnect()
    if not connected:
        return None
    return output.get("code", 1000) if output.get("type") == "websocket.close" else 1000


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_websocket_admits_roles_only(cluster, viewer, outsider):
    assert await close_code(cluster, [ORIGIN]) == 4401
    assert await close_code(cluster, [ORIGIN, await sync_to_async(session_cookie)(outsider)]) == 4403
    assert await close_code(cluster, [ORIGIN, await sync_to_async(session_cookie)(viewer)]) == 1000
    evil = (b"origin", b"http://evil.example")
    assert await close_code(cluster, [evil, await sync_to_async(session_cookie)(viewer)]) is None
