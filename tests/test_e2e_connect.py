"""Connecting a (fake) Proxmox cluster through the clusters page as a new admin would: test the
connection, trust the self-signed certificate shown, see what the token lacks before saving,
save, and find the cluster listed. The walk's duration is printed (the issue: under two minutes)."""

import time

import pytest
from test_e2e_dashboard import ARTIFACTS, browser, own_cluster, simulated  # noqa: F401  (a fixture)
from test_e2e_page import VIEWPORTS, open_page, overflow, serious_violations

from harness.fakepve import TOKEN

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(embedded_server):
    """The run's one embedded server with a cluster of this module's own (the page the admin
    starts from is a cluster's live page); the cluster the walk adds is archived with it."""
    with own_cluster(embedded_server, simulated("e2e-connect")) as served:
        yield served.url


def test_a_new_admin_connects_a_proxmox_cluster_and_sees_what_the_token_lacks_before_saving(browser, server, pve):  # noqa: F811
    pve.permissions = {"/": {"Sys.Audit": 1}, "/nodes": {"Sys.Audit": 1}, "/vms": {"VM.Audit": 1}}
    page = open_page(browser, server, "desktop")
    started = time.monotonic()
    page.click("#clusters-link")
    page.fill("#name", "pve-lab")
    page.fill("#host", "127.0.0.1")
    page.fill("#port", str(pve.port))
    page.fill("#token-id", "root")  # a bad token ID is named beside its field, in the field's words
    page.click("#test-connection")
    said = page.wait_for_selector("#token-id-error").inner_text()
    assert said.startswith("must be the user, realm and token name") and page.is_hidden("#form-errors")
    assert page.get_attribute("#token-id", "aria-invalid") == "true"
    page.fill("#token-id", TOKEN)  # the whole token, as the README writes it: the secret is split off
    page.click("#test-connection")
    tls = page.locator("#verdicts li[data-topic=tls]")
    assert tls.get_attribute("class") == "fail" and pve.fingerprint in tls.inner_text()
    assert page.inner_text("#trust") == f"Trust this certificate (SHA-256 {pve.fingerprint})"
    page.click("#trust")
    page.wait_for_selector("#verdicts li[data-topic=version]")
    assert page.input_value("#fingerprint") == pve.fingerprint
    privileges = page.locator("#verdicts li[data-topic=privileges]")
    assert privileges.get_attribute("class") == "fail"
    assert "missing VM.Migrate on /vms: without it no migration can start" in privileges.inner_text()
    page.screenshot(path=str(ARTIFACTS / "page-connect-tested.png"), full_page=True)
    page.click("#save-cluster")
    page.wait_for_selector("#saved")
    row = page.locator("tr[data-cluster=pve-lab]")
    assert "proxmox" in row.inner_text()
    walk = time.monotonic() - started
    print(f"\nconnect walk: {walk:.1f} s from the header link to the cluster listed")
    assert page.errors == []
    for viewport in VIEWPORTS:  # the page as listed, at a phone's and a desktop's width
        page.set_viewport_size(VIEWPORTS[viewport])
        page.reload()
        page.wait_for_selector("tr[data-cluster=pve-lab]")
        assert overflow(page) == 0 and serious_violations(page) == []
    page.close()
