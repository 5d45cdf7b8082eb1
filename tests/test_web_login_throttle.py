"""Login throttling (django-axes): repeated failures lock a username, and an address, out of the
login page and /admin/login/ for a while, with a clear page and an audit event."""

import pytest
from django.test import override_settings

from dashboard.models import AuditEvent

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("throttled")]
LIMIT = 5  # CRS_LOGIN_FAILURE_LIMIT's default


@pytest.fixture
def throttled():
    with override_settings(AXES_ENABLED=True):  # off in the test settings (project/test_settings.py)
        yield


def log_in(client, path, username, password, address="10.0.0.1"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_a_username_is_locked_after_the_limit_even_with_the_right_password(client, admin, path):
    for _ in range(LIMIT - 1):
        assert log_in(client, path, "admin", "wrong").status_code == 200  # the form again, with its error
    locked = log_in(client, path, "admin", "wrong")
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert f"After {LIMIT} failed logins for admin" in locked.content.decode()
    right = log_in(client, path, "admin", "pw", address="10.0.0.2")  # another address, the same user
    assert right.status_code == 429 and "_auth_user_id" not in client.session
    events = AuditEvent.objects.filter(action="login-locked-out").order_by("pk")
    assert [e.details for e in events] == [
        {"username": "admin", "address": "10.0.0.1"},  # the failure that reached the limit
        {"username": "admin", "address": "10.0.0.2"},  # and each attempt refused meanwhile
    ]


def test_an_address_is_locked_after_the_limit_whatever_the_usernames(client, admin):
    for n in range(LIMIT):
        log_in(client, "/accounts/login/", f"guess{n}", "wrong", address="10.0.0.9")
    assert log_in(client, "/accounts/login/", "admin", "pw", address="10.0.0.9").status_code == 429
    assert log_in(client, "/accounts/login/", "admin", "pw", address="10.0.0.10").status_code == 302  # others may


def test_a_success_before_the_limit_forgets_the_failures(client, admin):
    for _ in range(LIMIT - 1):
        log_in(client, "/accounts/login/", "admin", "wrong")
    assert log_in(client, "/accounts/login/", "admin", "pw").status_code == 302
    client.logout()
    for _ in range(LIMIT - 1):
        assert log_in(client, "/accounts/login/", "admin", "wrong").status_code == 200


def log_in_via_proxy(client, username, password, forwarded_for):
    """An attempt through a reverse proxy at 10.0.0.100, which appends the client's address."""
    return client.post(
        "/accounts/login/",
        {"username": username, "password": password},
        REMOTE_ADDR="10.0.0.100",
        HTTP_X_FORWARDED_FOR=forwarded_for,
    )


def test_by_default_the_forwarded_header_is_not_trusted(client, admin):
    # A guesser who rotates X-Forwarded-For is still one address, and locked out as one.
    for n in range(LIMIT):
        log_in_via_proxy(client, f"guess{n}", "wrong", forwarded_for=f"192.0.2.{n}")
    assert log_in_via_proxy(client, "admin", "pw", forwarded_for="192.0.2.77").status_code == 429
    assert AuditEvent.objects.filter(action="login-locked-out").first().details["address"] == "10.0.0.100"


@override_settings(CRS_TRUSTED_PROXY_COUNT=1)
def test_behind_a_trusted_proxy_the_client_address_is_locked_not_the_proxy(client, admin):
    # The client may forge entries to the left; the proxy appended the address it saw last.
    for n in range(LIMIT):
        log_in_via_proxy(client, f"guess{n}", "wrong", forwarded_for=f"203.0.113.{n}, 192.0.2.7")
    assert log_in_via_proxy(client, "admin", "pw", forwarded_for="192.0.2.7").status_code == 429
    assert AuditEvent.objects.filter(action="login-locked-out").first().details["address"] == "192.0.2.7"
    assert log_in_via_proxy(client, "admin", "pw", forwarded_for="192.0.2.8").status_code == 302  # others may


@override_settings(CRS_TRUSTED_PROXY_COUNT=2)
def test_a_forwarded_header_shorter_than_the_proxy_chain_is_not_trusted(client, admin):
    # Two proxies append two entries; one entry did not pass both: the nearest proxy is keyed.
    for n in range(LIMIT):
        log_in_via_proxy(client, f"guess{n}", "wrong", forwarded_for=f"192.0.2.{n}")
    assert log_in_via_proxy(client, "admin", "pw", forwarded_for="198.51.100.1, 10.0.0.50").status_code == 302
    assert AuditEvent.objects.filter(action="login-locked-out").first().details["address"] == "10.0.0.100"
