"""Clusters added, changed, archived and their connection tested through the API (admins), against
the fake PVE over real HTTPS; the token secret never comes back and is stored encrypted."""

import json

import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

from dashboard.models import AuditEvent, Cluster
from dashboard.signals import schedule_name
from dashboard.tasks import collect
from harness.fakepve import TOKEN

pytestmark = pytest.mark.django_db

TOKEN_ID, SECRET = TOKEN.split("=", 1)


def connection(pve, **changes):
    return {"host": "127.0.0.1", "port": pve.port, "token_id": TOKEN_ID, "token_secret": SECRET, **changes}


def post(client, url, data):
    return client.post(url, data, content_type="application/json")


def patch(client, url, data):
    return client.patch(url, data, content_type="application/json")


def everything_stored_and_shown(client, response):
    """The answer, the database row, the audit trail and the API's reads, as one text."""
    rows = list(Cluster.objects.values()) + list(AuditEvent.objects.values())
    reads = client.get("/api/v1/clusters/").content.decode() + client.get("/api/v1/audit/").content.decode()
    return response.content.decode() + json.dumps(rows, default=str) + reads


def test_an_admin_adds_a_proxmox_cluster_with_a_pinned_certificate_and_it_collects(admin_client, pve):
    spelled = pve.fingerprint.replace(":", "").lower()
    data = {"name": "pve", "source_kind": "proxmox", "proxmox": connection(pve, tls="fingerprint", fingerprint=spelled)}
    created = post(admin_client, "/api/v1/clusters/", data)
    assert created.status_code == 201, created.content
    shown = created.json()["proxmox"]
    assert shown == {
        "host": "127.0.0.1",
        "port": pve.port,
        "token_id": TOKEN_ID,
        "token_secret_set": True,
        "tls": "fingerprint",
        "ca_bundle": "",
        "fingerprint": pve.fingerprint,
    }
    assert SECRET not in everything_stored_and_shown(admin_client, created)
    cluster = Cluster.objects.get(name="pve")
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    assert cluster.source_error == "" and len(cluster.latest_snapshot().nodes) == 4
    event = AuditEvent.objects.get(action="cluster-created")
    assert event.details["changes"]["token_secret"] == [None, "***"]


def test_a_changed_secret_is_audited_as_changed_without_either_value(admin_client, pve):
    # The whole token as the README writes it (user@realm!name=secret), pasted into token_id, is split.
    whole = {"host": "127.0.0.1", "port": pve.port, "token_id": TOKEN}
    pasted = post(admin_client, "/api/v1/clusters/", {"name": "pve", "source_kind": "proxmox", "proxmox": whole})
    assert pasted.status_code == 201 and pasted.json()["proxmox"]["token_id"] == TOKEN_ID
    assert SECRET not in everything_stored_and_shown(admin_client, pasted)
    cluster = Cluster.objects.get(name="pve")
    url = f"/api/v1/clusters/{cluster.pk}/"
    renamed = patch(admin_client, url, {"name": "pve-prod", "proxmox": {"tls": "insecure"}})
    assert renamed.status_code == 200, renamed.content
    assert renamed.json()["proxmox"]["tls"] == "insecure" and renamed.json()["proxmox"]["token_secret_set"]
    cluster.refresh_from_db()
    assert cluster.effective_source_config()["token_value"] == SECRET  # no secret given: the stored one stays
    patch(admin_client, url, {"proxmox": {"token_secret": "new-secret-value"}})
    changes = [e.details["changes"] for e in AuditEvent.objects.filter(action="cluster-changed").order_by("pk")]
    assert changes[0]["name"] == ["pve", "pve-prod"] and "token_secret" not in changes[0]
    assert changes[0]["source_config"][1]["verify_ssl"] is False
    assert changes[1] == {"token_secret": ["***", "***"]}
    assert "new-secret-value" not in everything_stored_and_shown(admin_client, renamed)


def test_archiving_through_the_api_stops_rounds_and_unarchiving_resumes_them(admin_client, cluster):
    archived = post(admin_client, f"/api/v1/clusters/{cluster.pk}/archive/", {})
    assert archived.status_code == 200 and archived.json()["archived"] is True
    assert not PeriodicTask.objects.get(name=schedule_name(cluster.pk)).enabled
    assert post(admin_client, f"/api/v1/clusters/{cluster.pk}/unarchive/", {}).json()["archived"] is False
    assert PeriodicTask.objects.get(name=schedule_name(cluster.pk)).enabled
    changes = [e.details["changes"] for e in AuditEvent.objects.filter(action="cluster-changed").order_by("pk")]
    assert changes == [{"archived": [False, True]}, {"archived": [True, False]}]


def test_only_admins_add_change_archive_or_test(client, operator, cluster, pve):
    client.force_login(operator)
    assert client.get("/api/v1/clusters/").status_code == 200
    for url, data in [
        ("/api/v1/clusters/", {"name": "x", "source_kind": "simulator"}),
        (f"/api/v1/clusters/{cluster.pk}/archive/", {}),
        ("/api/v1/clusters/test-connection/", connection(pve)),
    ]:
        answer = post(client, url, data)
        assert answer.status_code == 403, url
    assert patch(client, f"/api/v1/clusters/{cluster.pk}/", {"name": "y"}).status_code == 403
    assert pve.requests == []


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"source_kind": "snapshot"}, "source_kind", "source_kind must be one of: simulator, proxmox"),
        ({"proxmox": {"tls": "maybe"}}, "proxmox", "tls must be one of: system, ca-bundle, fingerprint, insecure"),
        ({"proxmox": {"token_id": "root"}}, "proxmox", "token_id must be the user, realm and token name"),
        ({"proxmox": {"port": 0}}, "proxmox", "port must be 1..65535"),
        ({"proxmox": {"tls": "fingerprint", "fingerprint": "AB:CD"}}, "proxmox", "not a SHA-256 fingerprint"),
        ({"proxmox": {"tls": "fingerprint"}}, "proxmox", "tls fingerprint needs the certificate's fingerprint"),
        ({"proxmox": {"tls": "ca-bundle", "ca_bundle": "/nowhere"}}, "proxmox", "needs the path of a CA file"),
        ({"proxmox": {"token_secret": ""}}, "proxmox", "may not be blank"),
        ({"proxmox": {"ca_bundle": 0}}, "proxmox", "ca_bundle must be text"),
        ({"source_config": {"host": "elsewhere"}}, "source_config", "host: part of the connection; give it in proxmox"),
        ({"source_config": {"guests": "some"}}, "proxmox", "proxmox.guests: 'some' is not one of all, ha"),
    ],
    ids=[
        "kind",
        "tls",
        "token-id",
        "port",
        "fingerprint",
        "no-fingerprint",
        "ca-bundle",
        "secret",
        "not-text",
        "mixed",
        "option",
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_what_it_takes(admin_client, pve, changes, field, message):
    data = {"name": "pve", "source_kind": "proxmox", "proxmox": connection(pve)}
    data |= {k: v for k, v in changes.items() if k != "proxmox"}
    data["proxmox"] |= changes.get("proxmox", {})
    answer = post(admin_client, "/api/v1/clusters/", data)
    assert answer.status_code == 400, answer.content
    assert field in answer.json() and message in json.dumps(answer.json()), answer.json()
    assert not Cluster.objects.filter(name="pve").exists()


def test_test_connection_before_saving_offers_the_fingerprint_then_names_what_the_token_lacks(admin_client, pve):
    first = post(admin_client, "/api/v1/clusters/test-connection/", connection(pve))
    assert first.status_code == 200, first.content
    report = first.json()
    tls = next(f for f in report["findings"] if f["topic"] == "tls")
    assert (report["ok"], tls["ok"], report["fingerprint"]) == (False, False, pve.fingerprint)
    assert pve.fingerprint in tls["text"] and pve.requests == []  # the token was not sent

    pve.permissions = {"/": {"Sys.Audit": 1}, "/nodes": {"Sys.Audit": 1}, "/vms": {"VM.Audit": 1}}
    trusted = post(
        admin_client,
        "/api/v1/clusters/test-connection/",
        connection(pve, tls="fingerprint", fingerprint=tls["details"]["presented"]),
    ).json()
    verdicts = {f["topic"]: f for f in trusted["findings"]}
    assert verdicts["tls"]["ok"] and verdicts["version"]["text"].startswith("Proxmox VE 9.0.3")
    assert not verdicts["privileges"]["ok"]
    assert verdicts["privileges"]["text"].startswith("missing VM.Migrate on /vms: without it no migration can start")
    assert not Cluster.objects.exists()


def test_a_saved_cluster_s_connection_is_tested_with_its_stored_secret(admin_client, pve):
    data = {"name": "pve", "source_kind": "proxmox", "proxmox": connection(pve, tls="insecure")}
    pk = post(admin_client, "/api/v1/clusters/", data).json()["id"]
    report = post(admin_client, f"/api/v1/clusters/{pk}/test-connection/", {}).json()
    assert report["ok"], report
    labelled = next(f for f in report["findings"] if f["topic"] == "tls")["text"]
    assert labelled.startswith("NOT verified (insecure, chosen explicitly)")
    changed = post(
        admin_client, f"/api/v1/clusters/{pk}/test-connection/", {"tls": "fingerprint", "fingerprint": "AB" * 32}
    )
    assert "certificate changed: pinned AB:AB" in json.dumps(changed.json())


def test_the_schema_documents_the_cluster_writes_and_the_secret_as_write_only(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths = schema["paths"]
    assert {"post"} <= set(paths["/api/v1/clusters/"]) and "patch" in paths["/api/v1/clusters/{id}/"]
    for path in ("archive", "unarchive", "test-connection"):
        assert "post" in paths[f"/api/v1/clusters/{{id}}/{path}/"]
    assert "post" in paths["/api/v1/clusters/test-connection/"]
    secret = schema["components"]["schemas"]["ConnectionRequest"]["properties"]["token_secret"]
    assert secret["writeOnly"] is True
    assert "token_secret" not in schema["components"]["schemas"]["Connection"]["properties"]


def test_secrets_rotate_to_a_new_key_and_a_lost_key_is_named(admin_client, pve, settings):
    post(admin_client, "/api/v1/clusters/", {"name": "pve", "source_kind": "proxmox", "proxmox": connection(pve)})
    cluster = Cluster.objects.get(name="pve")
    sealed = cluster.token_secret
    from cryptography.fernet import Fernet

    new = Fernet.generate_key().decode()
    settings.CRS_FERNET_KEYS = [new]
    call_command("reencrypt_secrets")
    cluster.refresh_from_db()
    assert cluster.token_secret != sealed
    assert Fernet(new.encode()).decrypt(cluster.token_secret.encode()).decode() == SECRET
    settings.CRS_FERNET_KEYS, settings.SECRET_KEY = [Fernet.generate_key().decode()], "another-secret-key"
    collect.apply(args=[cluster.pk])
    cluster.refresh_from_db()
    assert "cannot be decrypted: CRS_FERNET_KEYS no longer holds the key" in cluster.source_error


def test_the_upgrade_seals_a_token_kept_in_the_source_config(db):
    from importlib import import_module

    from django.db import connection as db_connection
    from django.db.migrations.executor import MigrationExecutor

    cluster = Cluster.objects.create(name="old", source_kind="proxmox", source_config={"host": "pve"})
    Cluster.objects.filter(pk=cluster.pk).update(source_config={"host": "pve", "token": TOKEN})  # as stored before
    state = MigrationExecutor(db_connection).loader.project_state(("dashboard", "0024_clustersecret"))
    import_module("dashboard.migrations.0024_clustersecret").seal(state.apps, None)
    cluster.refresh_from_db()
    assert cluster.source_config == {"host": "pve", "user": "root@pam", "token_name": "crs"}
    assert SECRET not in cluster.token_secret and cluster.effective_source_config()["token_value"] == SECRET
